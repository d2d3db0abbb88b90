package outbox

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Policy is how the engine treats rows: the attempt budget, the retry
// backoff, the claim lease and the limits of one sweep. Build one from
// DefaultPolicy and change what you need; Validate before use.
type Policy struct {
	// MaxAttempts is the delivery budget per row, counting lost claims.
	MaxAttempts int
	// BackoffBase is the delay before the first retry.
	BackoffBase time.Duration
	// BackoffMultiplier is the growth factor per further attempt.
	BackoffMultiplier int
	// BackoffMax clamps any single delay (before jitter).
	BackoffMax time.Duration
	// Jitter spreads each delay uniformly over ±Jitter of itself, in [0, 1).
	Jitter float64
	// Lease is how long a claim stays exclusive. It must outlast the
	// invocation that holds it, or a slow sweep races the next one.
	Lease time.Duration
	// WakeGrace leaves rows younger than this to the stream wake; 0 when
	// the wake is off, so the sweep takes every due row.
	WakeGrace time.Duration
	// PageSize is the number of index entries read per query.
	PageSize int
	// Concurrency bounds parallel claims, sends and settles.
	Concurrency int
	// DeadlineMargin is kept free before the invocation deadline: no claim
	// starts and no batch is sent inside it; unsent claims are released.
	DeadlineMargin time.Duration
	// RowBudget caps the rows one sweep claims.
	RowBudget int
	// BatchLinger caps how long a partial batch waits for more rows of its
	// queue while claims are still arriving; a partial batch goes out at
	// once when nothing more is on its way.
	BatchLinger time.Duration
	// Ordered names the routes whose rows are staged in order per FIFO
	// group, with what a dead-lettered head does to its group. The engine
	// reads a listed route's rows' predecessor before it claims them; rows
	// of other routes that carry one are checked after the claim instead.
	Ordered map[string]DeadHead
	// HeadWait is how long the wake waits for an ordered row's predecessor
	// that is in flight elsewhere (claimed, or pending and never tried)
	// before it leaves the row to the sweep; 0 never waits. The sweep
	// never waits: its next pass finds the row.
	HeadWait time.Duration
}

// Bounds on the policy that keep its arithmetic and the stored rows sound.
const (
	// MaxAttemptsLimit is the largest attempt budget. Producers validate a
	// message's size with the attempt attribute at this width, so a message
	// accepted at staging fits at every attempt any budget allows.
	MaxAttemptsLimit = 1000
	// MaxBackoff is the largest BackoffMax: a year. Jitter can stretch it
	// by less than 2, so the delay and due time never overflow.
	MaxBackoff = 365 * 24 * time.Hour
	// MaxLease is the longest Lease (the template's LeaseSeconds cap). A
	// claim whose lease_until is far past it was not written by Outflow,
	// and is malformed: it would otherwise hold its row for ever.
	MaxLease = time.Hour
	// MinCallTimeout is the shortest CallTimeout a policy may give: an AWS
	// call bounded tighter than this fails however healthy the service.
	MinCallTimeout = time.Second
	// MaxHeadWait is the longest HeadWait: a wake waiting longer costs
	// more than the sweep that would deliver the row anyway.
	MaxHeadWait = time.Minute
	// MaxUnsureWait and MinUnsureWait bound the UnsureWait of any valid
	// policy (a CallTimeout is at most a third of MaxLease, and at least
	// MinCallTimeout): a purge waits out MaxUnsureWait when it cannot read
	// the dispatcher's own, or reads one no dispatcher can have.
	MaxUnsureWait = MaxLease/3 + UnsureMargin
	MinUnsureWait = MinCallTimeout + UnsureMargin
)

// DefaultPolicy returns the documented defaults.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:       8,
		BackoffBase:       time.Second,
		BackoffMultiplier: 2,
		BackoffMax:        15 * time.Minute,
		Jitter:            0.2,
		Lease:             5 * time.Minute,
		WakeGrace:         15 * time.Second,
		PageSize:          100,
		Concurrency:       16,
		DeadlineMargin:    10 * time.Second,
		RowBudget:         10000,
		BatchLinger:       2 * time.Second,
		HeadWait:          2 * time.Second,
	}
}

// FieldError says which setting is out of range. Field is the Go field
// name, so configuration layers can name their own variable instead.
type FieldError struct {
	Field string
	Value any
	Msg   string
}

// Error says which field, why, and the value it had.
func (e *FieldError) Error() string { return fmt.Sprintf("%s %s, got %v", e.Field, e.Msg, e.Value) }

// Validate reports every field that is out of range, as *FieldError values
// joined into one error.
func (p Policy) Validate() error {
	var errs []error
	check := func(ok bool, field string, value any, msg string) {
		if !ok {
			errs = append(errs, &FieldError{Field: field, Value: value, Msg: msg})
		}
	}
	check(p.MaxAttempts >= 1, "MaxAttempts", p.MaxAttempts, "must be at least 1")
	check(p.MaxAttempts <= MaxAttemptsLimit, "MaxAttempts", p.MaxAttempts, fmt.Sprintf("must be at most %d", MaxAttemptsLimit))
	check(p.BackoffBase > 0, "BackoffBase", p.BackoffBase, "must be positive")
	check(p.BackoffMultiplier >= 1, "BackoffMultiplier", p.BackoffMultiplier, "must be at least 1")
	check(p.BackoffMax >= p.BackoffBase, "BackoffMax", p.BackoffMax, fmt.Sprintf("must be at least the backoff base (%s)", p.BackoffBase))
	check(p.BackoffMax <= MaxBackoff, "BackoffMax", p.BackoffMax, fmt.Sprintf("must be at most %s", MaxBackoff))
	check(p.Jitter >= 0 && p.Jitter < 1, "Jitter", p.Jitter, "must be in [0, 1)")
	check(p.Lease > 0, "Lease", p.Lease, "must be positive")
	check(p.Lease <= MaxLease, "Lease", p.Lease, fmt.Sprintf("must be at most %s", MaxLease))
	check(p.WakeGrace >= 0, "WakeGrace", p.WakeGrace, "must not be negative")
	check(p.PageSize >= 1 && p.PageSize <= 1000, "PageSize", p.PageSize, "must be in [1, 1000]")
	check(p.Concurrency >= 1 && p.Concurrency <= 256, "Concurrency", p.Concurrency, "must be in [1, 256]")
	check(p.DeadlineMargin >= 0, "DeadlineMargin", p.DeadlineMargin, "must not be negative")
	check(p.RowBudget >= 1, "RowBudget", p.RowBudget, "must be at least 1")
	check(p.BatchLinger >= 0, "BatchLinger", p.BatchLinger, "must not be negative")
	check(p.HeadWait >= 0 && p.HeadWait <= MaxHeadWait, "HeadWait", p.HeadWait, fmt.Sprintf("must be in [0, %s]", MaxHeadWait))
	for route, dh := range p.Ordered {
		check(dh.Valid(), "Ordered", route+"="+string(dh), `must be "block" or "skip"`)
	}
	check(p.BatchLinger >= 0 && (p.Lease-p.BatchLinger)/3 >= MinCallTimeout, "BatchLinger", p.BatchLinger,
		fmt.Sprintf("must be at most the lease (%s) less %s: each AWS call gets (lease − linger) / 3, and needs at least %s", p.Lease, 3*MinCallTimeout, MinCallTimeout))
	return errors.Join(errs...)
}

// CheckDeadline reports whether a claim taken now can outlive an invocation
// that may run for timeout: the lease must be longer, or another sweep could
// claim the row while this one still sends it.
func (p Policy) CheckDeadline(timeout time.Duration) error {
	if p.Lease <= timeout {
		return fmt.Errorf("lease (%s) must be longer than the invocation timeout (%s)", p.Lease, timeout)
	}
	if p.DeadlineMargin >= timeout {
		return fmt.Errorf("deadline margin (%s) must be shorter than the invocation timeout (%s)", p.DeadlineMargin, timeout)
	}
	return nil
}

// CallTimeout bounds one store or deliverer call so that a row's claim,
// its send and its settle, with the batch linger between them, all end
// inside the row's lease: (Lease − BatchLinger) / 3. Validate keeps it at
// least MinCallTimeout.
func (p Policy) CallTimeout() time.Duration {
	return max((p.Lease-p.BatchLinger)/3, time.Millisecond)
}

// UnsureMargin is how long after a client gave up on a send request the
// target may still store it, as UnsureWait counts it. AWS documents no
// bound: a request the service has read whole is processed even if the
// client has gone. SQS, SNS and EventBridge answer in tens of
// milliseconds; a minute is three orders of magnitude past that, and the
// wait is cheap: it applies only to an ordered group under skip whose
// head's final attempt ended unsure, once.
const UnsureMargin = time.Minute

// UnsureWait is how long an ordered group under skip waits behind a dead
// head whose last attempt ended unsure (its outcome unknown: see
// Definite), counted from the head's failed_at: the longest the request
// could have run (CallTimeout, which bounds every send) plus UnsureMargin
// for a request stored after the client gave up. Past it, no copy of the
// head can land, so its successor cannot be passed by it.
func (p Policy) UnsureWait() time.Duration { return p.CallTimeout() + UnsureMargin }

// Backoff is the delay before the retry that follows the given 1-based
// attempt: base × multiplier^(attempt−1), clamped to BackoffMax. The
// arithmetic saturates, so a huge attempt pins the delay at the clamp.
func (p Policy) Backoff(attempt int) time.Duration {
	delay := p.BackoffBase
	for i := 1; i < attempt && delay < p.BackoffMax; i++ {
		if delay > math.MaxInt64/time.Duration(p.BackoffMultiplier) {
			return p.BackoffMax
		}
		delay *= time.Duration(p.BackoffMultiplier)
	}
	return min(delay, p.BackoffMax)
}

// jittered spreads d uniformly over [d·(1−Jitter), d·(1+Jitter)]. The
// product saturates at MaxBackoff×2 (and at 0): a float too large for a
// Duration converts to a negative one, which would make a retry due in the
// past.
func (p Policy) jittered(d time.Duration) time.Duration {
	if p.Jitter == 0 {
		return d
	}
	return scale(d, 1+p.Jitter*(2*rand.Float64()-1))
}

// scale returns d×f clamped to [0, 2×MaxBackoff].
func scale(d time.Duration, f float64) time.Duration {
	const ceiling = 2 * MaxBackoff
	v := float64(d) * f
	switch {
	case math.IsNaN(v) || v <= 0:
		return 0
	case v >= float64(ceiling):
		return ceiling
	}
	return time.Duration(v)
}
