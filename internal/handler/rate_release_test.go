package handler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
)

// OUTFLOW_SWEEP_RATE stops claims only: a batch of rows claimed before the
// next sweep was near, whose send waits behind a slow batch (or the
// batcher's linger), is sent, not released unsent, while the invocation
// has time (its own deadline margin). Releasing them cost two writes a row
// and a whole period's wait, at the end of every sweep of a backlog (found
// by review 17b).
func TestSweep_SweepRateStopsClaimsButNeverReleasesARowClaimedInTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rate string
	}{
		{"control: no rate", "0s"},
		{"rate 3s", "3s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
			rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "1", "OUTFLOW_CONCURRENCY": "1",
				"OUTFLOW_DEADLINE_MARGIN": "1s", "OUTFLOW_SWEEP_RATE": tt.rate})
			st, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
			require.NoError(t, err)
			// SQS takes 2.5 s per batch: the second batch of ten, claimed
			// at once, waits for the one sender until 2.5 s, past 3s − 1s.
			rt.Engine, err = outbox.New(st, slowDeliverer{delay: 2500 * time.Millisecond}, rt.Config.Policy)
			require.NoError(t, err)
			for i := range 20 {
				require.NoError(t, st.Stage(context.Background(), outbox.Row{Key: fmt.Sprintf("r%02d", i), Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			started := time.Now()
			sum, err := handler.NewSweep(rt).Handle(ctx, nil)
			require.NoError(t, err)
			require.Zero(t, sum.Released, "rows claimed within %.1fs released unsent %s into a 60 s invocation: %+v",
				2.0, time.Since(started).Round(time.Millisecond), sum)
			require.Positive(t, sum.Claimed, "%+v", sum)
			require.Equal(t, sum.Claimed, sum.Delivered, "every claimed row sent: %+v", sum)
		})
	}
}
