package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Review of issue 51 (R50-4 again), adopted: a row redriven as late keeps
// place_maybe_closed for good, so a later failed closing message says
// unsure, never unsent. The sweep's other way to a failed closing state,
// closeExpired (a row stranded pending with its budget spent, here
// MaxAttempts lowered below its attempts), wrote closed = unsent without
// reading PlaceMaybeClosed: p's first closing message may still have
// closed place 1 at the consumer, yet the dead letter said "a redrive
// sends the row in its place", which the store then refused.
func TestAdv51_ALateRedrivenRowStrandedWithItsBudgetSpentNeverSaysUnsent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p := keys[0]
	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 1
	var closings atomic.Int32
	var redriven atomic.Bool
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		switch {
		case r.Key == p && r.Closed == "" && redriven.Load():
			return outbox.Refused(errors.New("injected: throttled, try again"))
		case r.Key == p && r.Closed == "":
			return outbox.Permanent(errors.New("injected: refused for good"))
		case r.Key == p && closings.Add(1) == 1:
			// The first closing message: a timeout, SQS may have stored it.
			return errors.New("injected: send timed out")
		case r.Key == p:
			return outbox.Permanent(errors.New("injected: queue refused the closing message"))
		}
		return nil
	}}
	sweep := func() {
		t.Helper()
		_, err := h.engine(t, policy, log).Sweep(ctx)
		require.NoError(t, err)
		h.clock.Advance(policy.UnsureWait() + time.Minute)
	}
	for range 3 {
		sweep()
	}
	require.Equal(t, outbox.ClosedUnsure, h.row(t, p).Closed, "the first closing message may have landed")

	// The operator redrives p as late; its first send fails, to be retried.
	require.NoError(t, h.store.RedriveLate(ctx, p, h.clock.Now()))
	redriven.Store(true)
	policy.MaxAttempts = 3
	sweep()
	require.Equal(t, outbox.StatusPending, h.row(t, p).Status)
	require.Equal(t, 1, h.row(t, p).Attempt)

	// The budget is lowered: p is stranded with its budget spent.
	policy.MaxAttempts = 1
	sweep()
	row := h.row(t, p)
	require.Equal(t, outbox.StatusFailed, row.Status)
	require.False(t, row.PlaceMaybeClosed.IsZero(), "p was redriven as late")
	require.NotEqual(t, outbox.ClosedUnsent, row.Closed,
		"closed %q: p's first closing message may still have closed its place at the consumer", row.Closed)
	require.True(t, outbox.MayHaveClosed(row.Closed), "closed %q", row.Closed)
}
