package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// TestCheck_ReadsThePublishedRoutesAndExitsOneOnAFinding: with --table,
// check reads the routes the functions published and checks each target;
// a missing queue is a finding with its fix, and the exit status is 1;
// with every target there it is 0. Grants are unknown without --stack,
// and it says so (internal/targetcheck tests the stack's grants and every
// kind of finding).
func TestCheck_ReadsThePublishedRoutesAndExitsOneOnAFinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	missing := e.orders[:strings.LastIndex(e.orders, "/")+1] + "no-such-queue"
	fifo := awstest.NewQueue(t, true)

	r := e.run(t, "check")
	require.Equal(t, cli.ExitError, r.code, "nothing published yet: %s", r.stderr)
	require.Contains(t, r.stderr, "holds no published configuration yet")

	publish := func(routes map[string]string) {
		t.Helper()
		_, err := dynamo.Publish(context.Background(), awstest.DynamoDB(t), e.table, dynamo.Published{
			Routes: routes, Ordered: map[string]string{"ledger.fifo": "block"}, Shards: 4, MaxMessageBytes: 262144}, "outflow-sweep", time.Now())
		require.NoError(t, err)
	}
	publish(map[string]string{"orders": e.orders, "ledger.fifo": fifo, "audit": missing})
	r = e.run(t, "check")
	require.Equal(t, cli.ExitError, r.code, r.stderr)
	require.Contains(t, r.stdout, "✗ audit: its queue "+missing+" does not exist")
	require.Contains(t, r.stdout, "fix: create the queue")
	require.Contains(t, r.stdout, "3 routes checked, from table "+e.table+" (published configuration), grants not checked (give --stack): 1 finding")
	require.Contains(t, r.stderr, "outflow: 1 finding")

	r = e.run(t, "check", "--output", "json")
	require.Equal(t, cli.ExitError, r.code)
	var rep struct {
		Routes   int  `json:"routes"`
		Grants   bool `json:"grants_checked"`
		Findings []struct{ Route, Problem, Fix string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, 3, rep.Routes)
	require.False(t, rep.Grants)
	require.Len(t, rep.Findings, 1)
	require.Equal(t, "audit", rep.Findings[0].Route)

	publish(map[string]string{"orders": e.orders, "ledger.fifo": fifo})
	out := e.ok(t, "check")
	require.Contains(t, out, "2 routes checked")
	require.Contains(t, out, ": all OK")

	// No finding is an empty list, not null: a script's len() or for-each
	// works on it as on any other answer.
	out = e.ok(t, "check", "--output", "json")
	var none map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(out), &none))
	require.JSONEq(t, `[]`, string(none["findings"]), out)
}

// TestCheck_NeedsAStackOrATable: with neither it is a usage error.
func TestCheck_NeedsAStackOrATable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	delete(e.vars, "OUTFLOW_TABLE")
	r := e.run(t, "check")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "give --stack")
}
