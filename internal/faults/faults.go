// Package faults injects failures into the outbox engine's store and into
// the SQS, SNS and EventBridge APIs under its deliverer, for reliability
// tests. Every decision is a pure function of
// the seed, the fault site and the row's key and attempt (or, for a call
// that carries no attempt, the call's number for its key), so the same
// seed injects the same faults into the same row attempts however
// goroutines interleave, and into the same calls when they come in the
// same order.
package faults

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"
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
	// The stalls: a worker is held up (a slow pipeline, a suspended
	// process) while the clock runs past the lease of the row it holds.
	StallClaimed Kind = "stall: between claim and send, past the lease"
	StallSend    Kind = "stall: inside the deliverer, past the lease"
	StallSettle  Kind = "stall: before the settle, past the lease"
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
	calls    map[string]int // site -> calls made there so far (see nth)
}

// NewPlan returns an enabled plan.
func NewPlan(seed uint64, rates map[Kind]float64) *Plan {
	return &Plan{Seed: seed, Rates: rates, MaxDelay: 20 * time.Millisecond, enabled: true, counts: map[Kind]int{}, affected: map[string]int{}, calls: map[string]int{}}
}

// nth counts a call at site (an operation and a key) and returns its
// number, from 1: the identity of a call that carries no attempt of its
// own (a claim, a head check's read), so each draws its own decision and a
// run whose calls come in the same order draws the same ones. Neither the
// wall clock nor the run's clock, whose start differs from run to run,
// can stand in for it.
func (p *Plan) nth(site string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[site]++
	return p.calls[site]
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
	if unit(h.Sum64()) >= p.Rates[kind] {
		return false
	}
	p.counts[kind]++
	return true
}

// unit maps a hash to [0, 1). FNV-1a alone barely moves its high bits when
// only the last byte differs (attempt 1, 2, 3 of one key), which made one
// row's attempts fail together; the splitmix64 finalizer spreads every bit.
func unit(h uint64) float64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return float64(h>>11) / (1 << 53)
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
	return maps.Clone(p.counts)
}

// DuplicateWindows returns, per key, the faults that may have re-sent it.
func (p *Plan) DuplicateWindows() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.affected)
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
