package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Review 12c: the wake's hold on a key outlives the row it named.
//
// A stream batch may carry the INSERT image of an earlier row of a key
// (docs/reliability.md: "an earlier row of a key staged again"), and
// DeliverRefs keeps the FIRST ref of each key. Group g: A (seq 1) was
// delivered and deleted, B (seq 2, prev A) staged, then A's Put retried
// and staged A again as A' (seq 3, prev B). The wake's batch holds A's old
// image (seq 1, no prev) and B's (seq 2, prev A).
//
// emit holds A at place 1, so B parks behind A without a read. A's ref
// says "no predecessor", the claim returns A' (prev B, seq 3), and
// headAfterClaim parks A' behind B (the run holds B). Nothing ever tells
// the order state that the run's "A" is the row at place 3, not place 1
// (learn is only called for unlinked refs), so B stays parked behind a row
// that no longer exists and A' behind B: a cycle inside the run. The wake
// delivers nothing and reports both rows as waiting, although B's
// predecessor was delivered long ago and the architecture promises "a
// stream batch holding several rows of one group sends them in order in
// one invocation".
//
// Violated: invariant 2 (a held entry outlives its reason: B waits on a
// row the run does not hold). Expected: B, then A', delivered in this
// call. Suggested fix: when a claim reveals the row's own place
// (row.Seq != ref.Seq), call order.learn(row.Key, row.Seq) before
// headAfterClaim, so rows parked behind the stale place go back to be
// checked.
func TestOrdered_AWakeRefOfAnEarlierRowOfAKeyDoesNotParkItsSuccessorBehindAGhost(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	row := func(key string) outbox.Row {
		return outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(`{"k":"` + key + `"}`)}
	}
	require.NoError(t, h.store.StageOrdered(ctx, row("A"), h.clock.Now()))
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), nil)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.NoError(t, h.store.StageOrdered(ctx, row("B"), h.clock.Now()))
	require.NoError(t, h.store.StageOrdered(ctx, row("A"), h.clock.Now()))
	a2 := h.row(t, "A")
	require.Equal(t, int64(3), a2.Seq)
	require.Equal(t, "B", a2.Prev)

	log := &sendLog{next: h.sqs}
	w := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	res, err = w.DeliverRefs(ctx, []outbox.DueRef{
		{Key: "A", Queue: "events.fifo", Seq: 1, Linked: true}, // A's own INSERT image
		{Key: "B", Queue: "events.fifo", Prev: "A", Seq: 2, Linked: true},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"B", "A"}, log.accepted()["g"], "B (whose predecessor A was delivered) and then A' go in this call; result %+v", res)
}

// Review 12c, the same root as above, one row: the wake's batch holds only
// the INSERT image of A's earlier row (seq 1, no prev); A was delivered and
// staged again as A' (seq 2, prev A, its own key). The claim returns A',
// and headAfterClaim, which lacks headCheck's rule "a row that names its
// own key was staged again after that key's row was delivered", finds that
// the run "holds" A at place 1 (the stale image), releases the claim and
// parks A' behind itself. The wake delivers nothing; the row (the group's
// head, its predecessor delivered) waits for the sweep, counted as waiting.
//
// Violated: invariant 2 (a row waits on itself: the 12b self-wait, back
// on the wake's path). Expected: A' delivered in this call. Suggested fix:
// as above (learn the claimed row's place before headAfterClaim), and
// apply the own-key rule in headAfterClaim too.
func TestOrdered_AWakeRefOfAnEarlierRowOfAKeyDoesNotParkTheRowBehindItself(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	a := outbox.Row{Key: "A", Queue: "events.fifo", Group: "g", Payload: []byte(`{"k":"A"}`)}
	require.NoError(t, h.store.StageOrdered(ctx, a, h.clock.Now()))
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), nil)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.NoError(t, h.store.StageOrdered(ctx, a, h.clock.Now()))
	a2 := h.row(t, "A")
	require.Equal(t, int64(2), a2.Seq)
	require.Equal(t, "A", a2.Prev)

	log := &sendLog{next: h.sqs}
	w := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	res, err = w.DeliverRefs(ctx, []outbox.DueRef{{Key: "A", Queue: "events.fifo", Seq: 1, Linked: true}})
	require.NoError(t, err)
	require.Equal(t, []string{"A"}, log.accepted()["g"], "A' (its predecessor, A's earlier row, delivered) goes in this call; result %+v", res)
}
