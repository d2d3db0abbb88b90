package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/bench"
)

// TestRunStream_DeliversEveryRowOnceAndCountsRefusalsAlike runs a small
// live run (ordered groups, delayed rows, the wake and two partition
// sweeps): every row arrives once, the two paths' deliveries add up, and
// the engine's conflicts are exactly the refusals the middleware saw.
func TestRunStream_DeliversEveryRowOnceAndCountsRefusalsAlike(t *testing.T) {
	t.Parallel()
	res, err := bench.RunStream(context.Background(), awstest.Endpoint(), bench.StreamConfig{
		Rows: 60, Stage: 2 * time.Second, Producers: 2, Shards: 8, Partitions: 2, Tick: time.Second,
		Ordered: true, Delayed: 0.5, Poll: 100 * time.Millisecond, BatchSize: 100, Timeout: 2 * time.Minute,
	})
	require.NoError(t, err)
	require.Equal(t, 60, res.Delivered)
	require.Equal(t, res.Delivered, res.WakeDelivered+res.SweepDelivered)
	require.Zero(t, res.Duplicates)
	require.Equal(t, res.Conflicts(), res.Refused())
	require.Len(t, res.Kinds, 60)
	require.Positive(t, res.Stream.Count("DynamoDB Streams.GetRecords"))
}

// TestRunStream_LeanRowsCostTheTableAloneAndSettleAsConfigured runs the
// wake alone over rows staged lean, kept as done or deleted: every row is
// delivered by the wake, claim-free; staging and settle write no index, 2
// write units a message; a kept row is still in the table, without its
// payload, a deleted one is not.
func TestRunStream_LeanRowsCostTheTableAloneAndSettleAsConfigured(t *testing.T) {
	t.Parallel()
	for _, del := range []bool{false, true} {
		res, err := bench.RunStream(context.Background(), awstest.Endpoint(), bench.StreamConfig{
			Rows: 40, Stage: time.Second, Producers: 2, Shards: 8, Poll: 100 * time.Millisecond, BatchSize: 100,
			Lean: true, DeleteDone: del, Timeout: 2 * time.Minute,
		})
		require.NoError(t, err)
		require.Equal(t, 40, res.WakeDelivered)
		require.Zero(t, res.Duplicates)
		require.Equal(t, map[string]int{"settle": 40}, res.Wake.Writes(), "one settle a row, no claim")
		u := bench.LeanUsage(res, 256, 0.001)
		require.InDelta(t, 2, u.TableWRU, 1e-9, "stage 1, settle 1")
		require.Zero(t, u.IndexWRU)
		if del {
			require.Equal(t, 40, res.Wake.Count("DynamoDB.DeleteItem"))
			require.Zero(t, res.Kept)
		} else {
			require.Equal(t, 40, res.Wake.Count("DynamoDB.UpdateItem"))
			require.Equal(t, 40, res.Kept)
			// A tombstone keeps the row's digest, not its payload
			// (issue 50): about 200 bytes, where a row that kept its
			// 200-byte payload was about 350.
			require.Greater(t, res.KeptBytes, 100.0)
			require.Less(t, res.KeptBytes, 300.0)
		}
	}
}
