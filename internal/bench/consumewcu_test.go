package bench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/bench"
)

// On moto: each consume mode's recorded writes priced per message. Every
// item is under 1 KB, so a plain write is 1 unit and one in a transaction
// 2: the effect alone 1; the Inbox's transaction the effect and the inbox
// put, and on an ordered route the cursor's update too; Idempotency's
// put and update around an effect outside DynamoDB.
func TestConsumeModes_PricesEachModesWritesPerMessage(t *testing.T) {
	t.Parallel()
	modes, err := bench.ConsumeModes(context.Background(), awstest.Endpoint(), 20)
	require.NoError(t, err)
	type row struct{ wcu, adds, writes float64 }
	got := map[string]row{}
	for _, m := range modes {
		got[m.Name] = row{m.WCU, m.Adds, m.Writes}
	}
	require.Equal(t, map[string]row{
		"effect alone (plain UpdateItem)":       {1, 0, 1},
		"Inbox, unordered route":                {4, 3, 1},
		"Inbox, ordered route":                  {6, 5, 1},
		"Idempotency (effect outside DynamoDB)": {2, 2, 2},
	}, got)
}
