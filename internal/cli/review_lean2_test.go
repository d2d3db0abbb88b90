package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// TestReviewLean2_SweepBackstopCoversTheWholeTableWhateverTheFunctionsCursor:
// `outflow sweep --backstop` promises "the lean backstop over the whole
// table ... every pending or claimed row with no shard older than the
// wake grace goes into the due index, and this sweep delivers it". But it
// runs dynamo.Backstop.Run, which resumes at the cursor the sweep
// function's backstop saved (a few pages per sweep), and stops at the
// first PassDone: the end of the table, not a whole pass. Every missed
// row the function's pass had already gone by (young then, or missed
// since) is left where no sweep sees it.
func TestReviewLean2_SweepBackstopCoversTheWholeTableWhateverTheFunctionsCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	created := time.Now().Add(-time.Minute)
	const n = 6
	for i := range n {
		e.putLean(t, fmt.Sprintf("lean-%d", i), created)
	}
	// The sweep function's backstop ran at the rows' staging time (all
	// young: the wake's), one page short of the whole table, so its saved
	// place is before the last item.
	all, err := awstest.DynamoDB(t).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(e.table), Select: ddbtypes.SelectCount})
	require.NoError(t, err)
	fn, err := dynamo.NewBackstop(awstest.DynamoDB(t), dynamo.Config{Table: e.table, Shards: 4}, 15*time.Second, true)
	require.NoError(t, err)
	fn.Pages, fn.PageSize = 1, int(all.Count)-1
	res, err := fn.Run(ctx, created)
	require.NoError(t, err)
	require.Zero(t, res.Indexed, "young then: the wake's")
	require.False(t, res.PassDone)

	// The stream lost every record; the operator drains by hand.
	r := e.run(t, "sweep", "--backstop", "--output", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var sum struct {
		Delivered  int `json:"delivered"`
		MissedRows int `json:"missed_rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	require.Equal(t, n, sum.MissedRows, "a pass by hand over the whole table finds every missed lean row")
	require.Equal(t, n, sum.Delivered)
}
