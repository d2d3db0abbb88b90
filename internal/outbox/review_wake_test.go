package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Adversarial review of the wake's claim-free path (issue 27).

// TestWakeUnclaimed_AStaleInvocationNeverSettlesAKeyStagedAgainInTheSameMillisecond
// is TestWakeUnclaimed_AStaleInvocationNeverSettlesTheKeysNextRow without
// the clock moving: the key is staged again in the same millisecond, so
// created_at (the only thing asStaged tells incarnations apart by) is equal.
// A stale duplicate invocation must not settle the new row unsent.
func TestWakeUnclaimed_AStaleInvocationNeverSettlesAKeyStagedAgainInTheSameMillisecond(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":1}`)})
	stale := h.imageRef(t, "k")
	sends := newAccepted(h.sqs)
	e := h.engine(t, wakeGracePolicy(), sends)

	res, err := e.DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	h.gone(t, "k")

	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":2}`)})
	_, err = e.DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	require.Equal(t, []string{`{"v":1}`, `{"v":1}`}, sends.of("k"), "only the stale image was sent")
	require.Equal(t, `{"v":2}`, string(h.row(t, "k").Payload), "the key's next row, never sent, is still there")
}

// refusing refuses every row permanently, as a target that rejects the
// stale image's message would.
type refusing struct{}

func (refusing) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	for i := range errs {
		errs[i] = outbox.Permanent(errors.New("refused by the target"))
	}
	return errs
}

// TestWakeUnclaimed_AStaleInvocationNeverDeadLettersAKeyStagedAgainInTheSameMillisecond
// is the dead-letter form: the row was delivered, the key staged again in
// the same millisecond, and a stale duplicate invocation's send of the old
// image is refused permanently. The new row, never tried, must stay pending.
func TestWakeUnclaimed_AStaleInvocationNeverDeadLettersAKeyStagedAgainInTheSameMillisecond(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":1}`)})
	stale := h.imageRef(t, "k")
	res, err := h.engine(t, wakeGracePolicy(), h.sqs).DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	h.gone(t, "k")

	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":2}`)})
	_, err = h.engine(t, wakeGracePolicy(), refusing{}).DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	row := h.row(t, "k")
	require.Equal(t, outbox.StatusPending, row.Status, "the key's next row was never tried")
	require.Equal(t, 0, row.Attempt)
}

// failing fails every row with a transient error.
type failing struct{}

func (failing) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	for i := range errs {
		errs[i] = errors.New("target unavailable")
	}
	return errs
}

// TestWakeUnclaimed_AStaleInvocationNeverSpendsTheAttemptOfAKeyStagedAgainInTheSameMillisecond
// is the retry form: the stale invocation's transient failure must not
// count an attempt (or delay) on the key's next row, which was never tried.
func TestWakeUnclaimed_AStaleInvocationNeverSpendsTheAttemptOfAKeyStagedAgainInTheSameMillisecond(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":1}`)})
	stale := h.imageRef(t, "k")
	_, err := h.engine(t, wakeGracePolicy(), h.sqs).DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	h.gone(t, "k")

	h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":2}`)})
	_, err = h.engine(t, wakeGracePolicy(), failing{}).DeliverRefs(ctx, []outbox.DueRef{stale})
	require.NoError(t, err)
	require.Equal(t, 0, h.row(t, "k").Attempt, "the key's next row was never tried")
}
