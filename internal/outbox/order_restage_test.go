package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Review 12b: an ordered row whose key is staged again after it was
// delivered (and deleted: OUTFLOW_DONE_RETENTION=0; the default keeps it 24 h).
//
// This is what an idempotent producer retry does: Put (or the caller's
// TransactWriteItems) commits, the response is lost, the wake delivers and
// deletes the row, and the producer retries Put with the same key. Put is
// documented as idempotent, and the key's put condition
// (attribute_not_exists) no longer fails, so the key is staged again, as a
// new row at the group's tail. The docs (reliability.md, "A row whose place
// is unknown") acknowledge "an earlier row of a key staged again".

// TestOrdered_ARowStagedAgainWhileItIsTheTailIsNeverItsOwnPredecessor:
// when the key staged again is still the group's tail, the new row's prev
// is its own key. The head check then waits for the row itself: the sweep
// parks the row behind its own key (mine holds that key), so it is neither
// claimed nor counted as waiting, and every later row of the group waits
// behind it. The group is stuck for ever, and nothing names it: no dead
// letter, no BlockedGroups, Waiting 0, "drained"; only OldestDueAge (the
// backlog alarm) grows, with nothing to tell an operator why.
//
// Violated: invariant 2 (no row left unclaimed for ever when its
// predecessor is settled: the earlier row with that key was delivered) and
// 5 (staging must not fork: the chain now holds a cycle).
//
// Expected, whichever the fix: either staging refuses the key (or treats it
// as staged already), or the sweeps deliver the group.
func TestOrdered_ARowStagedAgainWhileItIsTheTailIsNeverItsOwnPredecessor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	a := outbox.Row{Key: "agg-1-created", Queue: "events.fifo", Group: "agg-1", Payload: []byte(`{"v":1}`)}
	require.NoError(t, h.store.StageOrdered(ctx, a, h.clock.Now()))

	log := &sendLog{next: h.sqs}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	h.gone(t, a.Key)

	// The producer's retry of the same Put, and the group's next row.
	restaged := h.store.StageOrdered(ctx, a, h.clock.Now())
	b := outbox.Row{Key: "agg-1-paid", Queue: "events.fifo", Group: "agg-1", Payload: []byte(`{"v":2}`)}
	require.NoError(t, h.store.StageOrdered(ctx, b, h.clock.Now()))
	if restaged == nil {
		if r, err := h.store.Get(ctx, a.Key); err == nil && r != nil {
			t.Logf("staged again: %s seq %d prev %q", r.Key, r.Seq, r.Prev)
		}
	}

	for range 5 {
		h.clock.Advance(2 * time.Minute)
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Contains(t, log.accepted()["agg-1"], b.Key, "the group's next row was never delivered: the group is stuck behind a row that waits for itself")
	h.gone(t, b.Key)
}

// TestOrdered_ARunsSettledCacheDoesNotLetARowPassAKeyStagedAgain: the
// run remembers the keys it settled (order.settled) for the whole run, by
// key alone. When a key the run delivered is staged again later in the
// same run, a row staged behind the new row finds its predecessor's key in
// that cache and goes at once, while the new row, and the row before it,
// are still pending.
//
// Group g: A (seq 1), B (seq 2). The sweep delivers A (deleted). B's first
// send fails (it retries after its backoff, so it stays pending). While
// B's send is in flight a producer stages A again (A', prev B) and C (prev
// A'). The sweep's next pass queries A' and C: A' is released to wait for
// B, but C's check finds "A" in settled and claims and sends C, ahead of
// both B and A'.
//
// Violated: invariant 1 (row n+1 is handed to the deliverer before row n
// is settled).
func TestOrdered_ARunsSettledCacheDoesNotLetARowPassAKeyStagedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	row := func(key string) outbox.Row {
		return outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(`{"k":"` + key + `"}`)}
	}
	require.NoError(t, h.store.StageOrdered(ctx, row("A"), h.clock.Now()))
	require.NoError(t, h.store.StageOrdered(ctx, row("B"), h.clock.Now()))

	// The hook runs on the engine's sender goroutine: it records what it
	// did, and the test's goroutine asserts it.
	var (
		once     sync.Once
		fired    bool
		stageErr error
	)
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) (err error) {
		if r.Key != "B" {
			return nil
		}
		once.Do(func() {
			// B is in flight: A was delivered and deleted before B went.
			fired = true
			stageErr = errors.Join(h.store.StageOrdered(ctx, row("A"), h.clock.Now()),
				h.store.StageOrdered(ctx, row("C"), h.clock.Now()))
			err = errors.New("injected: try again")
		})
		return err
	}}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	_, err := e.Sweep(ctx)
	require.NoError(t, err)
	// Sweep has returned, and with it every send.
	require.True(t, fired, "B was never sent, so A and C were never staged again while it was in flight: the test proves nothing")
	require.NoError(t, stageErr, "staging A again and C")

	b := h.row(t, "B")
	require.Equal(t, outbox.StatusPending, b.Status, "B retries after its backoff")
	var sent []string
	log.mu.Lock()
	for _, call := range log.calls {
		for _, r := range call {
			sent = append(sent, r.Key)
		}
	}
	log.mu.Unlock()
	require.NotContains(t, sent, "C", "C was handed to the deliverer while its predecessor A' (and A's own predecessor B) was pending: sends %v", sent)
}

// TestOrdered_AKeyStagedAgainBehindItsOwnSuccessorDoesNotDeadlockTheGroup:
// the key is staged again after the group moved on by a row that is not
// delivered yet. Group g: A (delivered, deleted), B (prev A, pending). The
// producer's retry of A's Put stages A again, as A' with prev B. Now B's
// prev, "A", names A', which is pending, so B waits for A'; and A' waits
// for B. Neither ever goes: a two-row cycle, every later row of the group
// stuck behind it, with no dead letter and no blocked group. B, a row whose
// real predecessor was delivered, never is. Both rows park behind each
// other, so a sweep reports them as nothing at all: Waiting 0, "drained";
// only OldestDueAge grows.
//
// Typical interleaving: producer 1's Put(A) commits but times out; the wake
// delivers A; producer 2 stages B; producer 1 retries Put(A).
//
// Violated: invariant 2 (a row left unclaimed for ever when its
// predecessor is settled) and 5 (the chain forks: two rows name A as prev).
func TestOrdered_AKeyStagedAgainBehindItsOwnSuccessorDoesNotDeadlockTheGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	row := func(key string) outbox.Row {
		return outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(`{"k":"` + key + `"}`)}
	}
	require.NoError(t, h.store.StageOrdered(ctx, row("A"), h.clock.Now()))
	log := &sendLog{next: h.sqs}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)

	require.NoError(t, h.store.StageOrdered(ctx, row("B"), h.clock.Now()))
	restaged := h.store.StageOrdered(ctx, row("A"), h.clock.Now())
	t.Logf("staging A again: %v", restaged)

	for range 3 {
		h.clock.Advance(time.Minute)
		res, err = e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Contains(t, log.accepted()["g"], "B", "B, whose predecessor A was delivered, never went: it waits for the row staged again under A's key, which waits for B (last sweep %+v)", res)
}
