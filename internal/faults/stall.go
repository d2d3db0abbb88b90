package faults

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Stalls holds workers up while their clock runs past the lease of the row
// they hold: between a claim and its send, inside the deliverer before its
// requests, and before a settle. Other workers go on meanwhile and find
// the claim lapsed. A stall moves the clock shared by every worker by
// Jump, and never while a delivery is in flight: every send call starts
// and ends at one reading of the clock, as a call bounded by the policy's
// CallTimeout does against a lease. Without that, a jump in the middle of
// another worker's call would stand for a call that outlived its timeout,
// which the functions and `outflow sweep` never make.
type Stalls struct {
	Plan *Plan
	// Advance moves the clock shared by the workers.
	Advance func(time.Duration)
	// Jump is how far a stall moves the clock: past the lease.
	Jump time.Duration
	// OnStall, if set, is called as each stall begins. Every worker's
	// leases lapse with the clock, not the stalled one's alone: a row
	// another worker sent and has yet to settle may be claimed and sent
	// again, which a caller counting duplicates must allow for.
	OnStall func()

	inFlight sync.RWMutex
}

// hits reports whether a stall of kind strikes at this site, drawn anew
// each time the site comes round. A release gives a claim's attempt back,
// so the next claim of the row is at the same attempt: drawn from the key
// and attempt alone, a row that stalled once stalled at every claim for
// as long as the faults ran, and its ordered group with it: a 2,000-row
// e2e soak counted 1,937 stalls between claim and send, where a draw per
// claim at 0.3% makes about ten. A stall is a pause of one worker, not a
// property of the row.
func (s *Stalls) hits(kind Kind, parts ...any) bool {
	n := s.Plan.nth(fmt.Sprint(append([]any{kind}, parts...)...))
	return s.Plan.Hit(kind, append(parts, n)...)
}

// stall moves the clock once no delivery is in flight.
func (s *Stalls) stall() {
	s.inFlight.Lock()
	if s.OnStall != nil {
		s.OnStall()
	}
	s.Advance(s.Jump)
	s.inFlight.Unlock()
}

// Store returns store with stalls after a claim and before each settle.
func (s *Stalls) Store(store outbox.Store) outbox.Store { return stallStore{Store: store, s: s} }

// Deliverer returns d with stalls before its requests; its deliveries run
// with the clock held still.
func (s *Stalls) Deliverer(d outbox.Deliverer) outbox.Deliverer { return stallDeliverer{next: d, s: s} }

type stallDeliverer struct {
	next outbox.Deliverer
	s    *Stalls
}

func (d stallDeliverer) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	if len(rows) > 0 && d.s.hits(StallSend, rows[0].Key, rows[0].Attempt) {
		d.s.stall()
	}
	d.s.inFlight.RLock()
	defer d.s.inFlight.RUnlock()
	return d.next.Deliver(ctx, queue, rows)
}

type stallStore struct {
	outbox.Store
	s *Stalls
}

func (st stallStore) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	row, err := st.Store.Claim(ctx, key, now, lease, maxAttempts)
	if err == nil && st.s.hits(StallClaimed, key, row.Attempt) {
		st.s.stall()
	}
	return row, err
}

func (st stallStore) settling(op string, row outbox.Row) {
	if st.s.hits(StallSettle, op, row.Key, row.Attempt) {
		if op == "done" {
			// Sent, and its settle may now come after another worker
			// claimed it again: sent again.
			st.s.Plan.MarkDuplicateWindow(row.Key)
		}
		st.s.stall()
	}
}

func (st stallStore) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	st.settling("done", row)
	return st.Store.Done(ctx, row, now)
}

func (st stallStore) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	st.settling("retry", row)
	return st.Store.Retry(ctx, row, dueAt, history)
}

func (st stallStore) Close(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	st.settling("retry", row)
	return st.Store.Close(ctx, row, dueAt, history)
}

func (st stallStore) DeadLetter(ctx context.Context, row outbox.Row, now time.Time, history []outbox.AttemptError) error {
	st.settling("dead-letter", row)
	return st.Store.DeadLetter(ctx, row, now, history)
}
