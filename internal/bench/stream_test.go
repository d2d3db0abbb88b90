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
