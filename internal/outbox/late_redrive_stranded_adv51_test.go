package outbox_test

import (
	"context"
	"testing"

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
	u := newUnsurePlace(t)
	h, p := u.h, u.p

	// The operator redrives p as late; its first send fails, to be retried.
	require.NoError(t, h.store.RedriveLate(ctx, p, h.clock.Now()))
	u.throttled.Store(true)
	u.policy.MaxAttempts = 3
	u.sweep(t)
	require.Equal(t, outbox.StatusPending, h.row(t, p).Status)
	require.Equal(t, 1, h.row(t, p).Attempt)

	// The budget is lowered: p is stranded with its budget spent.
	u.policy.MaxAttempts = 1
	u.sweep(t)
	row := h.row(t, p)
	require.Equal(t, outbox.StatusFailed, row.Status)
	require.False(t, row.PlaceMaybeClosed.IsZero(), "p was redriven as late")
	require.NotEqual(t, outbox.ClosedUnsent, row.Closed,
		"closed %q: p's first closing message may still have closed its place at the consumer", row.Closed)
	require.True(t, outbox.MayHaveClosed(row.Closed), "closed %q", row.Closed)
}
