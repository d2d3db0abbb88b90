package capacity

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// TestDrain_PartitionsDrainABacklogSoonerAndDeliverEachRowOnce drains a
// small backlog with one sweep partition and with four, in virtual time,
// and counts: every row delivered exactly once, none claimed twice, and
// four partitions needing fewer schedule periods than one (the row budget
// is cut so one sweep cannot take the backlog alone).
func TestDrain_PartitionsDrainABacklogSoonerAndDeliverEachRowOnce(t *testing.T) {
	t.Parallel()
	const rows = 20000
	var got [2]DrainResult
	for n, k := range []int{1, 4} {
		synctest.Test(t, func(t *testing.T) {
			s := DefaultSetup(k)
			s.Policy.RowBudget = 2000
			res, err := Drain(s, rows, 100)
			require.NoError(t, err)
			got[n] = res
		})
	}
	for _, res := range got {
		require.Equal(t, 0, res.Left, "k=%d: rows left", res.Partitions)
		require.Equal(t, int64(rows), res.Delivered, "k=%d: rows delivered", res.Partitions)
		require.Zero(t, res.Duplicates, "k=%d: rows sent more than once", res.Partitions)
		require.Zero(t, res.ReClaims, "k=%d: rows claimed more than once", res.Partitions)
		require.Zero(t, res.Surfaced, "k=%d: throttles surfaced", res.Partitions)
	}
	require.Equal(t, 10, got[0].Ticks, "one partition takes its budget each period")
	require.Less(t, got[1].Ticks, got[0].Ticks, "four partitions take four budgets each period")
	require.Less(t, got[1].Seconds, got[0].Seconds)
}
