package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// A group whose head is not due holds every row behind it. Only the
// head's state can let the group go, so a sweep reads the head, and each
// row behind parks behind the row before it, which the run holds from its
// page, without a read: a read per waiting row, again after each pass,
// would cost a strongly consistent read per row per pass for a group that
// cannot move (a hot group in the end-to-end soak holds 1,300 rows). Once
// the head is due, the group still goes in order, all of it in one sweep.
func TestOrdered_ASweepReadsAWaitingGroupsHeadNotEachRowBehindIt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		dh   outbox.DeadHead
	}{
		{"skip", outbox.DeadHeadSkip},
		{"block", outbox.DeadHeadBlock},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarnessShards(t, 1)
			const behind = 60
			keys := h.stageGroups(t, "events.fifo", []string{"g"}, behind+1)["g"]
			p := orderedPolicy(tc.dh)
			p.PageSize = 7 // many pages: a row's predecessor is often on an earlier one

			// Phase 1: the head's first attempt failed; it retries in an
			// hour, and the sweep leaves the group where it is.
			claimed, err := h.store.Claim(ctx, keys[0], h.clock.Now(), p.Lease, p.MaxAttempts)
			require.NoError(t, err)
			require.NoError(t, h.store.Retry(ctx, claimed, h.clock.Now().Add(time.Hour), nil))
			counted := &readCounter{Store: h.store}
			log := &sendLog{next: h.sqs}
			e, err := outbox.New(counted, log, p, outbox.WithClock(h.clock.Now))
			require.NoError(t, err)
			res, err := e.Sweep(ctx)
			require.NoError(t, err)
			require.Empty(t, log.accepted(), "nothing goes past a head in backoff")
			require.Equal(t, behind, res.Waiting, "%+v", res)
			require.LessOrEqual(t, counted.links.Load(), int64(4), "the sweep read the waiting rows' predecessors one by one")

			// Phase 2: the head falls due; one sweep delivers the group in
			// staging order.
			h.clock.Advance(2 * time.Hour)
			res, err = e.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, keys, log.accepted()["g"], "%+v", res)
			log.oneInFlight(t)
		})
	}
}
