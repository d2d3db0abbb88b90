package bench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// TestMeasureBackstop_ScansEveryItemOnceAndFindsEveryMissedRow builds a
// table of tombstones with three missed lean rows among them, and runs the
// backstop until its pass ends: it takes two runs of at most four pages,
// evaluates every item once, finds the three, and its read units are the
// rule's for the bytes it evaluated.
func TestMeasureBackstop_ScansEveryItemOnceAndFindsEveryMissedRow(t *testing.T) {
	t.Parallel()
	m, err := bench.MeasureBackstop(context.Background(), awstest.Endpoint(), 4500, 3)
	require.NoError(t, err)
	require.Equal(t, 3, m.Found())
	require.GreaterOrEqual(t, m.Items, 4503, "every row, and the table's own items")
	require.Len(t, m.Runs, 2)
	require.Equal(t, dynamo.DefaultBackstopPages, m.Runs[0].Pages)
	require.True(t, m.Runs[1].PassDone)
	require.Equal(t, 5, m.Pages())
	require.InDelta(t, 200, m.ItemBytes, 40, "tombstones, which keep no payload: a row's key, route, state and content digest")
	page := bench.ScanRRU(int(m.ItemBytes*1000), false)
	require.InDelta(t, 4*page, m.Runs[0].RRU, 1, "four full pages")
	require.Equal(t, 2, m.Requests.Count("DynamoDB.GetItem"), "the backstop item, once a run")
	require.Equal(t, 5, m.Requests.Count("DynamoDB.Scan"))
	require.Equal(t, map[string]int{"index": 3, "other": 2}, m.Requests.Writes(), "each found row put in the due index, and each run's save")
	require.InDelta(t, 2+3*2, m.Requests.WCU(bench.IndexWrites), 1e-9, "the saves, and each index write with its entry")
}
