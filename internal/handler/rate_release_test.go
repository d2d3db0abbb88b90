package handler_test

import (
	"context"
	"fmt"
	"sync"
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
			// SQS takes 2.5 s per batch: rows claimed while the first
			// batch is sent wait for the one sender until 2.5 s, past
			// 3s − 1s.
			sends := &batchSizes{next: slowDeliverer{delay: 2500 * time.Millisecond}}
			rt.Engine, err = outbox.New(st, sends, rt.Config.Policy)
			require.NoError(t, err)
			for i := range 20 {
				require.NoError(t, st.Stage(context.Background(), outbox.Row{Key: fmt.Sprintf("r%02d", i), Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			started := time.Now()
			sum, err := handler.NewSweep(rt).Handle(ctx, nil)
			require.NoError(t, err)
			// The premise: rows were claimed while the first batch was
			// being sent, before claims stopped (rate − margin), so they
			// waited behind that send past that point. Had no row been
			// claimed beyond the first batch, the release path was never
			// reached and nothing was proven.
			first := sends.first()
			require.Positive(t, first, "nothing was sent: %+v", sum)
			require.Greater(t, sum.Claimed, first, "no row was claimed behind the first batch (of %d) before claims stopped: the release path was not reached (%s): %+v",
				first, time.Since(started).Round(time.Millisecond), sum)
			require.Zero(t, sum.Released, "rows claimed within %.1fs released unsent %s into a 60 s invocation: %+v",
				2.0, time.Since(started).Round(time.Millisecond), sum)
			require.Equal(t, sum.Claimed, sum.Delivered, "every claimed row sent: %+v", sum)
		})
	}
}

// batchSizes records the size of each batch handed to next.
type batchSizes struct {
	next  outbox.Deliverer
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(rows))
	b.mu.Unlock()
	return b.next.Deliver(ctx, queue, rows)
}

// first is the size of the first batch sent (0 if none was).
func (b *batchSizes) first() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.sizes) == 0 {
		return 0
	}
	return b.sizes[0]
}
