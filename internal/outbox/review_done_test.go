package outbox_test

// Adopted from an adversarial review of 18ddd41 (a refused done counted
// as done when the row is gone or kept as done). Attack 2 broke it on the
// wake's path: a stale done, refused after the lease had lapsed and
// another worker's unsure dead letter had been purged, let the successor
// go within UnsureWait. The rule now trusts a refused done only while the
// run's own claim is live, when nobody else can have touched the row.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// stallDone holds up the Done of key until resume is closed, after
// signalling stalled: the settle of an accepted send is slow (a stalled
// DynamoDB call, a suspended process) and the row's lease lapses meanwhile.
type stallDone struct {
	outbox.Store
	key     string
	stalled chan struct{}
	resume  chan struct{}
	once    sync.Once
	mu      sync.Mutex
	errs    []error
}

func (s *stallDone) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	if row.Key == s.key {
		s.once.Do(func() { close(s.stalled); <-s.resume })
	}
	err := s.Store.Done(ctx, row, now)
	if row.Key == s.key {
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
	}
	return err
}

func (s *stallDone) doneErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// runStalled runs worker A (the wake, given the group's refs, or a sweep)
// with k0's Done stalled, calls meanwhile while it is stalled, then lets
// A's Done go on. It returns A's send log.
func runStalled(t *testing.T, h *harness, p outbox.Policy, keys []string, wake bool, meanwhile func()) (*sendLog, *stallDone, outbox.Result) {
	t.Helper()
	ctx := context.Background()
	st := &stallDone{Store: h.store, key: keys[0], stalled: make(chan struct{}), resume: make(chan struct{})}
	log := &sendLog{next: h.sqs}
	e, err := outbox.New(st, log, p, outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	type out struct {
		res outbox.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		var o out
		if wake {
			refs := []outbox.DueRef{{Key: keys[0], Queue: "events.fifo", Seq: 1, Linked: true}}
			for i := 1; i < len(keys); i++ {
				refs = append(refs, outbox.DueRef{Key: keys[i], Queue: "events.fifo", Prev: keys[i-1], Seq: int64(i + 1), Linked: true})
			}
			o.res, o.err = e.DeliverRefs(ctx, refs)
		} else {
			o.res, o.err = e.Sweep(ctx)
		}
		done <- o
	}()
	select {
	case <-st.stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("k0's done never came")
	}
	meanwhile()
	close(st.resume)
	o := <-done
	require.NoError(t, o.err)
	return log, st, o.res
}

// Attack 1: A's lease on the head lapses while its Done stalls; worker B
// claims the head and is still sending it. A's Done is refused with the
// row claimed (not gone, not done): A must not send the successor.
func TestReviewDone_ARefusedDoneWithTheHeadClaimedElsewhereHoldsTheGroup(t *testing.T) {
	t.Parallel()
	for _, wake := range []bool{true, false} {
		t.Run(map[bool]string{true: "wake", false: "sweep"}[wake], func(t *testing.T) {
			t.Parallel()
			h := newHarnessShards(t, 1)
			keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
			p := orderedPolicy(outbox.DeadHeadSkip)
			p.Concurrency = 1
			log, st, res := runStalled(t, h, p, keys, wake, func() {
				h.clock.Advance(61 * time.Second)
				_, err := h.store.Claim(context.Background(), keys[0], h.clock.Now(), time.Minute, p.MaxAttempts)
				require.NoError(t, err, "B claims the lapsed head")
			})
			var c *outbox.ConflictError
			require.ErrorAs(t, st.doneErr(), &c)
			require.NotNil(t, c.Current)
			require.Equal(t, outbox.StatusClaimed, c.Current.Status)
			require.Equal(t, []string{keys[0]}, log.accepted()["g"], "successor sent while B may still send the head: %+v", res)
		})
	}
}

// Attack 2: A's head send is accepted but its Done stalls past the lease;
// B claims the head on its final attempt, its send ends unsure (a
// timeout), B dead-letters it (skip: the group waits UnsureWait); an
// operator purges the dead letter. A's Done is refused: gone. Does A send
// the successor while B's unsure copy of the head may still land?
//
// Only the wake's path is checked here, with the purge forced past its
// hold (dynamo.Operator.Purge with no bounds). A sweep's later pass reads
// the head gone and sends the successor all the same, with or without the
// refused done: a purge lets a group go at once. That is why
// operate.Purge, behind outflow dead purge and the console, holds a dead
// letter within UnsureWait of an unsure send
// (TestOrdered_APurgeHoldsAnUnsureDeadHeadUntilNoCopyOfItCanLand).
func TestReviewDone_APurgedUnsureDeadHeadAndAStaleDone(t *testing.T) {
	t.Parallel()
	for _, wake := range []bool{true} {
		t.Run(map[bool]string{true: "wake", false: "sweep"}[wake], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarnessShards(t, 1)
			keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
			p := orderedPolicy(outbox.DeadHeadSkip)
			p.Concurrency = 1
			p.MaxAttempts = 2
			var unsureAt time.Time
			log, st, res := runStalled(t, h, p, keys, wake, func() {
				h.clock.Advance(61 * time.Second)
				b, err := h.store.Claim(ctx, keys[0], h.clock.Now(), time.Minute, p.MaxAttempts)
				require.NoError(t, err, "B claims the lapsed head")
				unsureAt = h.clock.Now()
				b.UnsureAt = unsureAt
				hist := []outbox.AttemptError{{At: unsureAt, Attempt: b.Attempt, Message: "timeout", Unsure: true}}
				require.NoError(t, h.store.DeadLetter(ctx, b, unsureAt, hist))
				op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
				require.NoError(t, err)
				require.NoError(t, op.Purge(ctx, keys[0], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))
			})
			var c *outbox.ConflictError
			require.ErrorAs(t, st.doneErr(), &c)
			require.NotNil(t, c.Current, "the purged head is its group's place, closing")
			require.Equal(t, outbox.ClosedPurged, c.Current.Closed)
			require.True(t, h.clock.Now().Before(unsureAt.Add(p.UnsureWait())))
			require.Equal(t, []string{keys[0]}, log.accepted()["g"], "successor sent within UnsureWait of B's unsure copy: %+v", res)
		})
	}
}

// Attack 3: DoneRetention=0; while A's Done stalls, B claims the lapsed
// head, delivers it, and the producer stages the key again (at the tail).
// A's Done is refused with Current the new pending row: not done anyway.
func TestReviewDone_ARestagedKeyIsNotDoneAnyway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p := orderedPolicy(outbox.DeadHeadSkip)
	p.Concurrency = 1
	log, st, res := runStalled(t, h, p, keys, true, func() {
		h.clock.Advance(61 * time.Second)
		b, err := h.store.Claim(ctx, keys[0], h.clock.Now(), time.Minute, p.MaxAttempts)
		require.NoError(t, err)
		require.NoError(t, h.store.Done(ctx, b, h.clock.Now()))
		require.NoError(t, h.store.StageOrdered(ctx, outbox.Row{Key: keys[0], Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)}, h.clock.Now()))
	})
	var c *outbox.ConflictError
	require.ErrorAs(t, st.doneErr(), &c)
	require.NotNil(t, c.Current)
	require.Equal(t, outbox.StatusPending, c.Current.Status)
	t.Logf("A sent %v; %+v", log.accepted()["g"], res)
	require.NotContains(t, log.accepted()["g"][1:], keys[0], "the re-staged key went before its predecessor")
}
