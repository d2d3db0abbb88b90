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

// TestDrain_SweepsBackOffAShardsCeilingAndRetryThrottledSettles drains
// 40,000 rows with four partitions, each owning one shard whose index
// takes 1,000 writes a second, where a sweep's 16 claimers would settle
// over 3,000: the sweeps back off their claims, and every row is sent
// once. With the SDK's retries off, every throttled settle reaches the
// engine, which tries it again within the lease instead of leaving the
// row to be sent a second time.
func TestDrain_SweepsBackOffAShardsCeilingAndRetryThrottledSettles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		sdkAttempts int
	}{
		{name: "the SDK's retries", sdkAttempts: 4},
		{name: "no SDK retry", sdkAttempts: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const rows = 40000
				s := DefaultSetup(4)
				s.Limits.SDKMaxAttempts = c.sdkAttempts
				res, err := Drain(s, rows, 100)
				require.NoError(t, err)
				require.Equal(t, 0, res.Left)
				require.Equal(t, int64(rows), res.Delivered)
				require.Zero(t, res.Duplicates, "rows sent more than once")
				require.Zero(t, res.ReClaims, "rows claimed more than once")
				require.Zero(t, res.Sweep.Errors, "store calls the engine gave up on")
				require.Positive(t, res.Throttles, "the sweeps met the ceiling")
				require.LessOrEqual(t, res.Sweep.ClaimConcurrency, s.Policy.Concurrency/4, "and backed off their claims")
				if c.sdkAttempts == 1 {
					require.Equal(t, res.Throttles, res.Surfaced, "every throttle reached the engine")
				}
			})
		})
	}
}
