package outbox

import (
	"context"
	"sync"
	"time"
)

// claimGate bounds a sweep's claims in flight by a limit it adapts to
// throttling: additive increase, multiplicative decrease. A throttle
// anywhere in the sweep's store calls (NoteThrottle) halves the limit, at
// most once per claimGateCooldown, since the throttles of one burst arrive
// together and one cut answers them all; each claimGateCooldown without a
// throttle adds one claim, up to the policy's Concurrency. A sweep
// starts at Concurrency and so finds its shards' room in a few seconds:
// the settles that follow the claims are what fill a shard's index
// partition (1,000 write units a second), and the claim rate sets theirs.
type claimGate struct {
	now func() time.Time
	max float64

	mu       sync.Mutex
	limit    float64
	inflight int
	// changed is closed, and replaced, when a slot may have come free.
	changed chan struct{}
	// cut is when the limit was last halved; grown when it last grew.
	cut, grown time.Time
	// lowest is the least limit the gate went down to.
	lowest float64
}

// claimGateCooldown is the gate's step in time: one halving per cooldown at
// most, one claim more per cooldown without a throttle. A second is a
// DynamoDB partition's unit of rate and of burst, so a cut's effect shows
// within one.
const claimGateCooldown = time.Second

// claimGateKey keys the sweep's gate in the context its store calls get.
type claimGateKey struct{}

func newClaimGate(limit int, now func() time.Time) *claimGate {
	t := now()
	return &claimGate{now: now, max: float64(limit), limit: float64(limit), lowest: float64(limit), changed: make(chan struct{}), grown: t}
}

// with returns ctx carrying g, for NoteThrottle.
func (g *claimGate) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, claimGateKey{}, g)
}

// acquire waits for a slot; it reports false if ctx ended first.
func (g *claimGate) acquire(ctx context.Context) bool {
	for {
		g.mu.Lock()
		g.grow(g.now())
		if g.inflight < max(1, int(g.limit)) {
			g.inflight++
			g.mu.Unlock()
			return true
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// release frees a slot.
func (g *claimGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	g.signal()
}

// throttled halves the limit, unless it was cut within the cooldown.
func (g *claimGate) throttled() {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.cut.IsZero() && now.Sub(g.cut) < claimGateCooldown {
		return
	}
	g.limit = max(1, g.limit/2)
	g.lowest = min(g.lowest, g.limit)
	g.cut, g.grown = now, now
}

// grow adds one claim per cooldown passed since the last change; the
// caller holds mu.
func (g *claimGate) grow(now time.Time) {
	if g.limit >= g.max {
		g.grown = now
		return
	}
	if steps := now.Sub(g.grown) / claimGateCooldown; steps > 0 {
		g.limit = min(g.max, g.limit+float64(steps))
		g.grown = g.grown.Add(steps * claimGateCooldown)
		g.signal()
	}
}

// signal wakes the waiters; the caller holds mu.
func (g *claimGate) signal() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// low is the least claim concurrency the gate went down to.
func (g *claimGate) low() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(1, int(g.lowest))
}
