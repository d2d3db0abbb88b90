package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Adversarial review of the wake's claim-free path (issue 27).

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

// failing fails every row with a transient error.
type failing struct{}

func (failing) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	for i := range errs {
		errs[i] = errors.New("target unavailable")
	}
	return errs
}

// TestWakeUnclaimed_AStaleInvocationNeverSettlesAKeyStagedAgainInTheSameMillisecond
// is TestWakeUnclaimed_AStaleInvocationNeverSettlesTheKeysNextRow without
// the clock moving: the key is staged again in the same millisecond, so
// created_at is equal, and only the stage id tells the two rows apart. A
// stale duplicate invocation of the wake, sending the first row's image
// again, must leave the key's next row as staged whatever its send's
// outcome: not settled done unsent (the send succeeds), not dead-lettered
// (the target refuses it), and not charged an attempt or delayed (it
// fails).
func TestWakeUnclaimed_AStaleInvocationNeverSettlesAKeyStagedAgainInTheSameMillisecond(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		target func(*harness) outbox.Deliverer // the stale invocation's
	}{
		{"the stale send succeeds", func(h *harness) outbox.Deliverer { return h.sqs }},
		{"the target refuses the stale send", func(*harness) outbox.Deliverer { return refusing{} }},
		{"the stale send fails", func(*harness) outbox.Deliverer { return failing{} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			ctx := context.Background()

			// Phase 1: the row is staged and delivered from its image.
			h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":1}`)})
			stale := h.imageRef(t, "k")
			res, err := h.engine(t, wakeGracePolicy(), h.sqs).DeliverRefs(ctx, []outbox.DueRef{stale})
			require.NoError(t, err)
			require.Equal(t, 1, res.Delivered)
			h.gone(t, "k")

			// Phase 2: the key is staged again in the same millisecond, and a
			// stale invocation delivers the first row's image again.
			h.stage(t, outbox.Row{Key: "k", Queue: "orders", Payload: []byte(`{"v":2}`)})
			sends := newAccepted(tc.target(h))
			_, err = h.engine(t, wakeGracePolicy(), sends).DeliverRefs(ctx, []outbox.DueRef{stale})
			require.NoError(t, err)

			// Phase 3: the key's next row is as staged, never sent.
			require.NotContains(t, sends.of("k"), `{"v":2}`, "only the stale image was sent")
			row := h.row(t, "k")
			require.Equal(t, `{"v":2}`, string(row.Payload))
			require.Equal(t, outbox.StatusPending, row.Status, "the key's next row was never tried")
			require.Equal(t, 0, row.Attempt)
			require.Equal(t, row.CreatedAt, row.DueAt, "not delayed by the stale send's failure")
		})
	}
}
