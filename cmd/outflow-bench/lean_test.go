package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/bench"
)

// TestLeanChoose_PicksTheSettleWhoseTableCostsLess compares the two
// settles as the cost part does, on measured figures made up here: the
// same write units, so the tombstone's day of items (storage, and the
// backstop's reads and long pass) decides for the delete.
func TestLeanChoose_PicksTheSettleWhoseTableCostsLess(t *testing.T) {
	t.Parallel()
	run := func(kept int) bench.StreamResult {
		return bench.StreamResult{WakeDelivered: 600, Kept: kept, KeptBytes: 351, Wake: bench.NewRequests(), Stage: bench.NewRequests(),
			WakeLags: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}}
	}
	l := leanPath{
		settles: []leanSettle{{name: "tombstone", res: run(50)}, {name: "delete", res: run(0)}},
		backstop: bench.BackstopMeasure{Items: 10_000, ItemBytes: 350, Requests: bench.NewRequests(),
			Runs: []bench.BackstopRun{{Pages: 4, RRU: 172}, {Pages: 4, RRU: 172}, {Pages: 2, RRU: 86, PassDone: true}}},
	}
	l.choose()
	require.Equal(t, "delete", l.chosen().name)
	costs := l.settleCosts(leanRate)
	require.Equal(t, 864_000, costs[0].items, "a day of tombstones at 10 a second")
	require.Equal(t, 3, costs[1].items, "the rows in flight: 10 a second for 0.3 s")
	require.Positive(t, costs[0].storage)
	require.Zero(t, costs[1].storage)
	require.Greater(t, costs[0].backstop, 10*costs[1].backstop)
	require.InDelta(t, (15*time.Second + 216*time.Minute + time.Minute).Minutes(), costs[0].longestIn, 1e-9)
}
