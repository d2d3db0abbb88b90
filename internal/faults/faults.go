// Package faults injects failures into the outbox engine's store and
// deliverer, for reliability tests. Every decision is a pure function of
// the seed, the fault site and the row's key and attempt, so the same seed
// injects the same faults into the same row attempts however goroutines
// interleave.
package faults

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Kind names a fault.
type Kind string

// The faults this package injects.
const (
	SendCall       Kind = "send: whole call fails"
	SendEntry      Kind = "send: entry fails (transient)"
	SendSender     Kind = "send: entry refused (sender fault)"
	SendAmbiguous  Kind = "send: sent, but reported failed"
	SettleBefore   Kind = "settle: fails, not applied"
	SettleAfter    Kind = "settle: applied, but reported failed"
	Throttle       Kind = "store: throttled"
	Delay          Kind = "store: delayed"
	Crash          Kind = "sweep: crashed mid-flight"
	ClaimAmbiguous Kind = "claim: applied, but reported failed"
)

// ErrInjected is wrapped by every injected error.
var ErrInjected = errors.New("injected fault")

// Plan decides which faults happen and records them.
type Plan struct {
	Seed uint64
	// Rates are per-decision probabilities, by kind.
	Rates map[Kind]float64
	// MaxDelay bounds injected delays.
	MaxDelay time.Duration

	mu       sync.Mutex
	enabled  bool
	counts   map[Kind]int
	affected map[string]int // key -> faults that could cause a duplicate send
}

// NewPlan returns an enabled plan.
func NewPlan(seed uint64, rates map[Kind]float64) *Plan {
	return &Plan{Seed: seed, Rates: rates, MaxDelay: 20 * time.Millisecond, enabled: true, counts: map[Kind]int{}, affected: map[string]int{}}
}

// Stop turns every fault off, for the drain after a soak.
func (p *Plan) Stop() { p.mu.Lock(); p.enabled = false; p.mu.Unlock() }

// Hit reports whether the fault kind strikes at this site: a pure function
// of the seed, the kind and the parts (key, attempt, ...). A hit is counted.
func (p *Plan) Hit(kind Kind, parts ...any) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.enabled || p.Rates[kind] <= 0 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s", p.Seed, kind)
	for _, part := range parts {
		fmt.Fprintf(h, "|%v", part)
	}
	if float64(h.Sum64())/float64(math.MaxUint64) >= p.Rates[kind] {
		return false
	}
	p.counts[kind]++
	return true
}

// MarkDuplicateWindow records that a fault on key may make it be sent again.
func (p *Plan) MarkDuplicateWindow(key string) {
	p.mu.Lock()
	p.affected[key]++
	p.mu.Unlock()
}

// Counts returns how many faults of each kind were injected.
func (p *Plan) Counts() map[Kind]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Kind]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// DuplicateWindows returns, per key, the faults that may have re-sent it.
func (p *Plan) DuplicateWindows() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.affected))
	for k, v := range p.affected {
		out[k] = v
	}
	return out
}

// Report formats the counts, one kind per line, sorted.
func (p *Plan) Report() string {
	counts := p.Counts()
	kinds := make([]string, 0, len(counts))
	total := 0
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("  %-40s %d", k, n))
		total += n
	}
	sort.Strings(kinds)
	return fmt.Sprintf("faults injected: %d\n%s", total, strings.Join(kinds, "\n"))
}

func injected(kind Kind) error { return fmt.Errorf("%w: %s", ErrInjected, kind) }

// Deliverer wraps a deliverer with send faults.
type Deliverer struct {
	Next outbox.Deliverer
	Plan *Plan
}

// Deliver implements outbox.Deliverer.
func (d Deliverer) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	if len(rows) > 0 && d.Plan.Hit(SendCall, rows[0].Key, rows[0].Attempt) {
		for i := range errs {
			errs[i] = injected(SendCall)
		}
		return errs
	}
	var pass []outbox.Row
	var idx []int
	for i, r := range rows {
		switch {
		case d.Plan.Hit(SendEntry, r.Key, r.Attempt):
			errs[i] = injected(SendEntry)
		case d.Plan.Hit(SendSender, r.Key, r.Attempt):
			errs[i] = outbox.Permanent(injected(SendSender))
		default:
			pass, idx = append(pass, r), append(idx, i)
		}
	}
	if len(pass) == 0 {
		return errs
	}
	for j, err := range d.Next.Deliver(ctx, queue, pass) {
		r := pass[j]
		if err == nil && d.Plan.Hit(SendAmbiguous, r.Key, r.Attempt) {
			d.Plan.MarkDuplicateWindow(r.Key)
			err = injected(SendAmbiguous)
		}
		errs[idx[j]] = err
	}
	return errs
}

// Store wraps a store with write faults on every transition that follows
// a send, throttling and delays.
type Store struct {
	outbox.Store
	Plan *Plan
}

func (s Store) before(ctx context.Context, op string, row outbox.Row) error {
	if s.Plan.Hit(Delay, op, row.Key, row.Attempt) {
		select {
		case <-time.After(s.Plan.MaxDelay):
		case <-ctx.Done():
		}
	}
	kind := Kind("")
	switch {
	case s.Plan.Hit(Throttle, op, row.Key, row.Attempt):
		kind = Throttle
	case s.Plan.Hit(SettleBefore, op, row.Key, row.Attempt):
		kind = SettleBefore
	default:
		return nil
	}
	if op == "done" {
		s.Plan.MarkDuplicateWindow(row.Key) // sent, still claimed: sent again after the lease
	}
	return injected(kind)
}

func (s Store) after(op string, row outbox.Row, err error) error {
	if err == nil && s.Plan.Hit(SettleAfter, op, row.Key, row.Attempt) {
		return injected(SettleAfter)
	}
	return err
}

// Claim implements outbox.Store; a claim can be applied yet reported
// failed, which loses the attempt like a crash.
func (s Store) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	if s.Plan.Hit(Throttle, "claim", key, now.UnixNano()) {
		return outbox.Row{}, injected(Throttle)
	}
	row, err := s.Store.Claim(ctx, key, now, lease, maxAttempts)
	if err == nil && s.Plan.Hit(ClaimAmbiguous, key, row.Attempt) {
		return outbox.Row{}, injected(ClaimAmbiguous)
	}
	return row, err
}

// Done implements outbox.Store.
func (s Store) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	if err := s.before(ctx, "done", row); err != nil {
		return err
	}
	return s.after("done", row, s.Store.Done(ctx, row, now))
}

// Retry implements outbox.Store.
func (s Store) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	if err := s.before(ctx, "retry", row); err != nil {
		return err
	}
	return s.after("retry", row, s.Store.Retry(ctx, row, dueAt, history))
}

// DeadLetter implements outbox.Store.
func (s Store) DeadLetter(ctx context.Context, row outbox.Row, now time.Time, history []outbox.AttemptError) error {
	if err := s.before(ctx, "dead-letter", row); err != nil {
		return err
	}
	return s.after("dead-letter", row, s.Store.DeadLetter(ctx, row, now, history))
}

// Release implements outbox.Store.
func (s Store) Release(ctx context.Context, row outbox.Row) error {
	if err := s.before(ctx, "release", row); err != nil {
		return err
	}
	return s.after("release", row, s.Store.Release(ctx, row))
}
