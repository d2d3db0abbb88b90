package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Review 12c: the wake still polls, for the whole HeadWait, a predecessor
// that cannot move, when what holds it is not a dead head but a retrying
// one.
//
// Group g: O (its first send failed: pending, attempt 1, due in an hour),
// P (pending, never tried, due), Q (new). A stream batch with Q (and an
// unordered row) reaches the wake. mayMove(P) sees P "pending, never
// tried, due" and its predecessor O "not blocked" (Blocks is false for a
// pending row), so it says P may move, and the wake polls P every 25-400
// ms for the full HeadWait. P cannot move before O, and O is not due for an
// hour. Every new row of a group whose head is retrying (a consumer's
// queue throttled, a KMS key denied for a while...) costs one wake
// invocation a full HeadWait, and the stream shard's later records,
// of every group and of unordered routes, wait behind it: the 12b fix for
// the same symptom (TestOrdered_TheWakeDoesNotWaitForAPredecessorThatIsNotInFlight)
// covers a dead or not-due predecessor, not a predecessor held by a row
// that is not due.
//
// Violated: invariant 2 (a waiting group holds only itself).
// Expected: no polling (at most the two reads mayMove makes). Suggested
// fix: mayMove requires P's own predecessor to be settled (or itself in
// flight: claimed), not merely "not blocked".
func TestOrdered_TheWakeDoesNotPollAPredecessorHeldByARetryingRow(t *testing.T) {
	t.Parallel()
	const headWait = 10 * time.Second
	h := newHarness(t)
	ctx := context.Background()
	p := orderedPolicy(outbox.DeadHeadBlock)
	p.HeadWait = headWait
	k := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
	head, err := h.store.Claim(ctx, k[0], h.clock.Now(), p.Lease, p.MaxAttempts)
	require.NoError(t, err)
	require.NoError(t, h.store.Retry(ctx, head, h.clock.Now().Add(time.Hour), nil))
	h.stage(t, rowsFor("orders", 1, "")...)
	store := &readCounter{Store: h.store}
	e, err := outbox.New(store, h.sqs, p, outbox.WithClock(h.clock.Now))
	require.NoError(t, err)

	start := time.Now()
	res, err := e.DeliverRefs(ctx, []outbox.DueRef{
		{Key: k[2], Queue: "events.fifo", Prev: k[1], Seq: 3, Linked: true},
		{Key: "orders-0", Queue: "orders", Linked: true},
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.Equal(t, 1, res.Waiting)
	require.LessOrEqual(t, store.links.Load(), int64(2), "the wake polled a predecessor that cannot move for %s", time.Since(start))
}
