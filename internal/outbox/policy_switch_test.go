package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// A dead letter left with its place never closed (dead-lettered while its
// route was under block, or not listed, so held as block) is closed by the
// run, in its place, before its successor goes once the route is listed
// under skip: the successor follows the closing message, on the sweep's
// path and on the wake's, and the group never counts as blocked under
// skip, since no operator is needed (issue 50, item 1).
func TestPolicySwitch_AnUnclosedDeadLetterIsClosedInItsPlaceBeforeItsSuccessorGoes(t *testing.T) {
	t.Parallel()
	unlisted := testPolicy()
	tests := []struct {
		name   string
		before outbox.Policy
		// wake says the first look under skip is the wake's, with the
		// successor's stream image, rather than a sweep's.
		wake bool
	}{
		{name: "block then skip, the sweep first", before: orderedPolicy(outbox.DeadHeadBlock)},
		{name: "block then skip, the wake first", before: orderedPolicy(outbox.DeadHeadBlock), wake: true},
		{name: "unlisted then skip, the sweep first", before: unlisted},
		{name: "unlisted then skip, the wake first", before: unlisted, wake: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarnessShards(t, 1)
			keys := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
			p, s := keys[0], keys[1]
			log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
				if r.Key == p && r.Closed == "" {
					return outbox.Permanent(errors.New("injected: refused for good"))
				}
				return nil
			}}

			res, err := h.engine(t, tt.before, log).Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, res.DeadLettered)
			dead := h.row(t, p)
			require.Equal(t, outbox.StatusFailed, dead.Status)
			require.Empty(t, dead.Closed, "no message closed p's place before the switch")
			require.Empty(t, log.accepted()["g"], "nothing of g reached SQS before the switch")

			skip := orderedPolicy(outbox.DeadHeadSkip)
			h.clock.Advance(time.Minute)
			if tt.wake {
				r := h.row(t, s)
				res, err := h.engine(t, skip, log).DeliverRefs(ctx, []outbox.DueRef{{Key: s, Queue: r.Queue, Prev: r.Prev, Seq: r.Seq, Linked: true}})
				require.NoError(t, err)
				require.Zero(t, res.BlockedGroups, "under skip no operator is needed: %+v", res)
				require.NotContains(t, log.accepted()["g"], s, "the wake sent s past p's unclosed place")
			}
			for range 4 {
				res, err := h.engine(t, skip, log).Sweep(ctx)
				require.NoError(t, err)
				require.Zero(t, res.BlockedGroups, "under skip no operator is needed: %+v", res)
				h.clock.Advance(time.Minute)
			}

			require.Equal(t, keys, log.accepted()["g"], "p's place, then s, then the rest")
			require.Equal(t, outbox.ClosedDeadLetter, log.order[0].Closed, "p's place went as its closing message, not as p")
			dead = h.row(t, p)
			require.Equal(t, outbox.StatusFailed, dead.Status, "p is the dead letter it was")
			require.Equal(t, outbox.ClosedDeadLetter, dead.Closed)
			require.Contains(t, dead.LastError, "refused for good", "p keeps its own reason")
		})
	}
}

// A dead letter's place the run would close is not a blocked group in the
// operator's views under skip (the sweep closes it when its successor
// comes), while under block, and with its place open, it is.
func TestPolicySwitch_AnUnclosedDeadLetterBlocksOnlyUnderBlock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy outbox.DeadHead
		closed string
		blocks bool
	}{
		{name: "never closed, under skip", policy: outbox.DeadHeadSkip, blocks: false},
		{name: "never closed, under block", policy: outbox.DeadHeadBlock, blocks: true},
		{name: "closed, under skip", policy: outbox.DeadHeadSkip, closed: outbox.ClosedDeadLetter, blocks: false},
		{name: "its closing message unsent, under skip", policy: outbox.DeadHeadSkip, closed: outbox.ClosedUnsent, blocks: true},
		{name: "its closing message maybe sent, under skip", policy: outbox.DeadHeadSkip, closed: outbox.ClosedUnsure, blocks: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := outbox.Link{Queue: "events.fifo", Group: "g", Seq: 1, Closed: tt.closed}
			ordered := map[string]outbox.DeadHead{"events.fifo": tt.policy}
			require.Equal(t, tt.blocks, outbox.DeadLetterBlocks(ordered, l))
			l.Found, l.Status = true, outbox.StatusFailed
			require.False(t, l.Settles(tt.policy) && tt.closed == "", "a place never closed never lets its successor go as it is")
		})
	}
}
