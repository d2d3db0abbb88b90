package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Review 12c: a wake that dead-letters a group's head under block, with
// the head's successor in the same batch, reports the successor as
// waiting but not the group as blocked.
//
// docs/reliability.md, failure table: "A row of an ordered group is
// dead-lettered under block: ... Each sweep or wake that finds a row
// waiting behind it reports the group" (BlockedGroups, OldestBlockedAgeMs,
// the BlockedGroupAlarm's metric). Here B parks behind A without a read,
// A's send is refused for good, A is dead-lettered, and release(A, nil)
// drops B to "left": the wake's summary says Waiting 1, BlockedGroups 0,
// and no read of A is ever made that would note it. The wake is the path
// a fresh burst takes, so the first report of a blocked group is missed;
// with a BlockedGroupAlarm fed from summaries, the alarm's clock starts
// only when a sweep next looks.
//
// Violated: invariant 2 (wrong BlockedGroups count). Expected:
// BlockedGroups 1. Suggested fix: when the run dead-letters a row under
// block (deadSettles false, row.Seq > 0) and rows were parked behind it,
// noteBlocked(row.Key, now).
func TestOrdered_AWakeThatDeadLettersAHeadReportsItsBlockedGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	k := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		if r.Key == k[0] {
			return outbox.Permanent(errors.New("injected: refused for good"))
		}
		return nil
	}}
	w := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	a, b := h.row(t, k[0]), h.row(t, k[1])
	res, err := w.DeliverRefs(ctx, []outbox.DueRef{
		{Key: a.Key, Queue: a.Queue, Seq: a.Seq, Linked: true},
		{Key: b.Key, Queue: b.Queue, Prev: b.Prev, Seq: b.Seq, Linked: true},
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLettered)
	require.Equal(t, 1, res.Waiting, "B waits behind the dead head")
	require.Equal(t, 1, res.BlockedGroups, "the wake found B waiting behind a dead head under block: %+v", res)
}
