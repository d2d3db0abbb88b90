package outbox_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Adopted from an outside review (shared/review/ordering): a row claimed on
// its final attempt was sent after its lease had lapsed, once another sweep
// had expired it and, under skip, sent its successor. The fence (no send
// call starts unless it can end inside the row's lease) closes it, in the
// engine before Deliver and in the deliverer before each request.

// stallAfterClaim advances the clock by stall once the row key is claimed:
// the claimer is held up between its claim and the send (behind other
// batches, or a suspended process), every call inside CallTimeout.
type stallAfterClaim struct {
	outbox.Store
	key   string
	clock *clock
	stall time.Duration
	once  sync.Once
}

func (s *stallAfterClaim) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, max int) (outbox.Row, error) {
	row, err := s.Store.Claim(ctx, key, now, lease, max)
	if err == nil && key == s.key {
		s.once.Do(func() { s.clock.Advance(s.stall) })
	}
	return row, err
}

// stallInDeliver is sweep A's deliverer: handed the row key, it stalls
// past the row's lease before the request (as a deliverer whose earlier
// requests of the same Deliver took their time does), lets the test run
// another sweep meanwhile, then sends through next, the real router.
type stallInDeliver struct {
	next    outbox.Deliverer
	key     string
	clock   *clock
	stalled chan struct{}
	resume  chan struct{}
	mu      sync.Mutex
	handed  []string
}

func (d *stallInDeliver) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	d.mu.Lock()
	for _, r := range rows {
		d.handed = append(d.handed, r.Key)
	}
	d.mu.Unlock()
	if slices.ContainsFunc(rows, func(r outbox.Row) bool { return r.Key == d.key }) {
		d.clock.Advance(61 * time.Second)
		close(d.stalled)
		<-d.resume
	}
	return d.next.Deliver(ctx, queue, rows)
}

// TestReview_ALeaseThatLapsesWhileTheRowIsQueuedLetsItsSuccessorGoFirst:
// a head p claimed on its final attempt is held up in sweep A until its
// lease no longer covers a send; sweep B runs meanwhile. p is never sent
// by A, so the group's first arrivals keep staging order: p then s when A
// gives p back in time; when B found p's final claim lapsed first, the
// message closing p's place, once no send of A's can land, then s (p a
// dead letter whose place the consumer is told of: before, B expired p
// and s went past a place no message closed, which an adversarial review
// of issue 38 found would hold a GapWait consumer for ever).
func TestReview_ALeaseThatLapsesWhileTheRowIsQueuedLetsItsSuccessorGoFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// inDeliver stalls inside the deliverer (the router's per-request
		// fence) rather than between the claim and the send (the engine's).
		inDeliver bool
		want      func(p, s string) []string
	}{
		{"held between claim and send: the engine releases p, then p and s go in order", false, func(p, s string) []string { return []string{p, s} }},
		{"held inside the deliverer while another sweep finds p's final claim lapsed: the router refuses to send p, p's place is closed after its unsure end, then s", true, func(p, s string) []string { return []string{p, s} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarnessShards(t, 1)
			policy := orderedPolicy(outbox.DeadHeadSkip)
			policy.MaxAttempts = 2
			policy.Concurrency = 1

			keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
			p, s := keys[0], keys[1]

			// Attempt 1 of p is refused (a throttle, say): p is retried, s waits.
			log := &sendLog{next: h.sqs}
			first := &sendLog{next: log, fail: func(r outbox.Row) error {
				if r.Key == p {
					return outbox.Refused(errTransient)
				}
				return nil
			}}
			_, err := h.engine(t, policy, first).Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, h.row(t, p).Attempt)
			h.clock.Advance(2 * time.Second) // p's retry is due

			// Sweep A claims p, its final attempt, and is held up.
			var store outbox.Store = h.store
			d := &stallInDeliver{next: log, key: p, clock: h.clock, stalled: make(chan struct{}), resume: make(chan struct{})}
			if !tc.inDeliver {
				// 45 s of a 60 s lease gone: a call of CallTimeout (about 20 s) no
				// longer fits.
				store = &stallAfterClaim{Store: h.store, key: p, clock: h.clock, stall: 45 * time.Second}
				close(d.resume)
			}
			eA, err := outbox.New(store, d, policy, outbox.WithClock(h.clock.Now))
			require.NoError(t, err)
			doneA := make(chan outbox.Result, 1)
			go func() {
				res, _ := eA.Sweep(ctx)
				doneA <- res
			}()

			if tc.inDeliver {
				select {
				case <-d.stalled:
				case <-time.After(30 * time.Second):
					t.Fatal("sweep A never handed p to its deliverer")
				}
				require.True(t, h.clock.Now().After(h.row(t, p).LeaseUntil), "p's lease lapsed while sweep A holds it")

				// Sweep B, the scheduled function, at that moment: p's claim
				// lapsed on its final attempt, so B expires it; whether A sent
				// p is unknown to B, so s waits.
				resB, err := h.engine(t, policy, log).Sweep(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, resB.Expired, "B ended p's final attempt")
				require.Equal(t, outbox.ClosedDeadLetter, h.row(t, p).Closed, "p waits to close its place")
				require.Zero(t, resB.Delivered, "s went while p might still land")
				close(d.resume)
			}
			resA := <-doneA
			t.Logf("sweep A: %+v", resA)
			require.Zero(t, resA.Delivered, "A sent nothing")
			require.NotContains(t, log.accepted()["g"], p, "no request carried p once its lease could not cover it")
			if !tc.inDeliver {
				require.Equal(t, 1, resA.Released, "A gave p back unsent")
				require.NotContains(t, d.handed, p, "the engine kept p from its deliverer")
			}

			// Later sweeps, past any unsure wait, deliver what remains.
			h.clock.Advance(policy.UnsureWait())
			_, err = h.engine(t, policy, log).Sweep(ctx)
			require.NoError(t, err)

			want := tc.want(p, s)
			// Two asked for either way: a late p must not go unseen.
			got := awstest.ReceiveKeys(t, h.routes["events.fifo"], 2, 5*time.Second)
			t.Logf("SQS order of group g: %v (staged %v)", got, keys)
			require.Equal(t, want, got, "first arrivals of group g out of staging order")
			if tc.inDeliver {
				dead := h.row(t, p)
				require.Equal(t, outbox.StatusFailed, dead.Status)
				require.Equal(t, outbox.ClosedDeadLetter, dead.Closed, "p's place was closed by its message")
				require.Contains(t, dead.LastError, "lease expired on final attempt")
			}
		})
	}
}

// TestSkip_ARowStrandedWithItsBudgetSpentHoldsItsGroupWithItsPlaceOpen: a
// head p left pending with its budget spent (here, MaxAttempts lowered
// below its attempts) was claimed by no one, so no message closed its
// place: it is expired with its place marked open (ClosedUnsent), and its
// successor waits, the group blocked (the BlockedGroupAlarm's count),
// until a redrive or a purge; before, s went past a place no message
// closed.
func TestSkip_ARowStrandedWithItsBudgetSpentHoldsItsGroupWithItsPlaceOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p, s := keys[0], keys[1]

	// Phase 1: p's first attempt fails; it is retried, s waits.
	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 3
	log := &sendLog{next: h.sqs}
	failP := &sendLog{next: log, fail: func(r outbox.Row) error {
		if r.Key == p {
			return outbox.Refused(errTransient)
		}
		return nil
	}}
	_, err := h.engine(t, policy, failP).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, h.row(t, p).Attempt)
	h.clock.Advance(time.Minute)

	// Phase 2: the budget is lowered to 1; p is stranded and expires with
	// its place open, and s waits.
	policy.MaxAttempts = 1
	res, err := h.engine(t, policy, log).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Expired)
	require.Zero(t, res.Delivered, "s went past p's open place")
	row := h.row(t, p)
	require.Equal(t, outbox.StatusFailed, row.Status)
	require.Equal(t, outbox.ClosedUnsent, row.Closed)

	// Phase 3: however long after, s still waits for an operator.
	h.clock.Advance(policy.UnsureWait() + time.Hour)
	res, err = h.engine(t, policy, log).Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Delivered)
	require.Equal(t, 1, res.BlockedGroups)
	require.NotContains(t, log.accepted()["g"], s)
}
