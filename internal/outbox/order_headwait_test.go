package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// TestOrdered_TheWakeDoesNotWaitForAPredecessorThatIsNotInFlight: the
// wake's head check (prevGate) polls a predecessor for up to HeadWait when
// it is "in flight": claimed, or pending and never tried (attempt 0). But
// a pending row at attempt 0 is just as often not in flight at all:
//
//   - it waits behind a dead head of a block route (its group is blocked:
//     it will not move until an operator acts), or
//   - it is not due yet (staged with NotBefore).
//
// Each stream batch holding a new row of such a group then polls for the
// whole HeadWait (2 s by default, up to 1 min) and gives up. The wake's
// invocation lasts that long, and a stream shard's batches are processed
// one after another, so every later record of the shard, of every group
// and of unordered routes, waits too. A blocked group that keeps receiving
// rows thus slows the wake for everyone.
//
// Violated: invariant 2 (a blocked or waiting group holds only itself;
// nothing else waits).
//
// Expected: DeliverRefs leaves the row waiting without polling a
// predecessor that cannot move (its own predecessor is a dead head under
// block, or it is not due), and returns about as fast as the unordered
// row's delivery.
func TestOrdered_TheWakeDoesNotWaitForAPredecessorThatIsNotInFlight(t *testing.T) {
	t.Parallel()
	const headWait = 10 * time.Second
	tests := []struct {
		name  string
		setup func(t *testing.T, h *harness, p outbox.Policy) (ref outbox.DueRef)
	}{
		{"its own predecessor is a dead head under block", func(t *testing.T, h *harness, p outbox.Policy) outbox.DueRef {
			k := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
			head, err := h.store.Claim(context.Background(), k[0], h.clock.Now(), p.Lease, p.MaxAttempts)
			require.NoError(t, err)
			require.NoError(t, h.store.DeadLetter(context.Background(), head, h.clock.Now(), nil))
			// k[1] is pending, never tried, and blocked; k[2] is new.
			return outbox.DueRef{Key: k[2], Queue: "events.fifo", Prev: k[1], Linked: true}
		}},
		{"it is not due yet", func(t *testing.T, h *harness, p outbox.Policy) outbox.DueRef {
			ctx := context.Background()
			later := outbox.Row{Key: "later", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`), NotBefore: h.clock.Now().Add(time.Hour)}
			now := outbox.Row{Key: "now", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)}
			require.NoError(t, h.store.StageOrdered(ctx, later, h.clock.Now()))
			require.NoError(t, h.store.StageOrdered(ctx, now, h.clock.Now()))
			return outbox.DueRef{Key: "now", Queue: "events.fifo", Prev: "later", Linked: true}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			p := orderedPolicy(outbox.DeadHeadBlock)
			p.HeadWait = headWait
			ref := tt.setup(t, h, p)
			h.stage(t, rowsFor("orders", 1, "")...)
			store := &readCounter{Store: h.store}
			e, err := outbox.New(store, h.sqs, p, outbox.WithClock(h.clock.Now))
			require.NoError(t, err)

			res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{ref, {Key: "orders-0", Queue: "orders", Linked: true}})
			require.NoError(t, err)
			require.Equal(t, 1, res.Delivered)
			require.Equal(t, 1, res.Waiting)
			// One read of the predecessor, one of its own predecessor: no
			// polling (some 25 reads over the HeadWait).
			require.LessOrEqual(t, store.links.Load(), int64(2), "the wake polled a predecessor that cannot move")
		})
	}
}

// timedLog records when each row reached the deliverer.
type pollLog struct {
	next  outbox.Deliverer
	links *atomic.Int64
	mu    sync.Mutex
	at    map[string]int64
	// sent, if set, is called with each key after next accepted it.
	sent func(ctx context.Context, key string)
}

func (l *pollLog) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	l.mu.Lock()
	for _, r := range rows {
		l.at[r.Key] = l.links.Load()
	}
	l.mu.Unlock()
	errs := l.next.Deliver(ctx, queue, rows)
	for i, r := range rows {
		if errs[i] == nil && l.sent != nil {
			l.sent(ctx, r.Key)
		}
	}
	return errs
}

// TestOrdered_AWakeHeadWaitDoesNotHoldOtherRowsClaimedRowsBack: while a
// claimer polls a predecessor in flight elsewhere (HeadWait, by design),
// it counts as a claim in flight, so the batcher's upstreamIdle is false
// and every row already claimed in the same invocation (other groups,
// unordered rows) sits in its partial batch until BatchLinger (2 s by
// default) instead of going at once. Their leases run meanwhile, and the
// waiting group holds up rows that have nothing to do with it.
//
// Violated: invariant 2 (a waiting group holds only itself; nothing else
// waits).
//
// Expected: the unordered row is handed to the deliverer as soon as it is
// claimed (well under BatchLinger); observed: after BatchLinger.
func TestOrdered_AWakeHeadWaitDoesNotHoldOtherRowsClaimedRowsBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	k := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	h.stage(t, rowsFor("orders", 1, "")...)
	p := orderedPolicy(outbox.DeadHeadBlock)
	// Both far longer than the test takes: the batch's linger must not be
	// what sends the unordered row, and the claimer polls until the head
	// settles.
	p.HeadWait = 40 * time.Second
	p.BatchLinger = 30 * time.Second
	// Another invocation holds the head. It settles it once the unordered
	// row has reached the deliverer, or, if that never happens while the
	// claimer polls, at the claimer's read after its 20th: a count of
	// reads, not a timer, so no machine is too fast or too slow for it.
	const settleCap = 20
	head, err := h.store.Claim(context.Background(), k[0], h.clock.Now(), p.Lease, p.MaxAttempts)
	require.NoError(t, err)
	store := &settlesAfterReads{Store: h.store, head: head, reads: settleCap, now: h.clock.Now}
	log := &pollLog{next: h.sqs, links: &store.seen, at: map[string]int64{}, sent: func(ctx context.Context, key string) {
		if key == "orders-0" {
			store.settle(ctx)
		}
	}}
	e, err := outbox.New(store, log, p, outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{
		{Key: k[1], Queue: "events.fifo", Prev: k[0], Linked: true},
		{Key: "orders-0", Queue: "orders", Linked: true},
	})
	require.NoError(t, err)
	require.NoError(t, store.settleErr())
	require.Equal(t, 2, res.Delivered, "the head settled within HeadWait, so both go")
	log.mu.Lock()
	defer log.mu.Unlock()
	// Held back, the unordered row goes only once the claimer stops
	// polling, after the head settled at the cap: at read settleCap+1 or
	// later.
	polls := log.at["orders-0"]
	require.LessOrEqual(t, polls, int64(settleCap), "the unordered row, claimed at once, waited in its batch through %d polls of the ordered row's predecessor, until the head settled at the cap", polls)
}
