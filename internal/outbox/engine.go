package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Engine claims due rows, delivers them and settles each one. It is safe for
// concurrent use; every call runs on its own.
type Engine struct {
	store     Store
	deliverer Deliverer
	policy    Policy
	now       func() time.Time
	log       *slog.Logger
	// serial runs each call on its caller's goroutine, one request at a
	// time, in an order that depends only on what the store and the
	// deliverer answer, never on the Go scheduler, so a simulation that
	// interleaves engines by a seed (the soak's scheduled run) replays
	// exactly. Only tests set it (WithSerial, in export_test.go).
	serial bool
}

// Option configures an Engine.
type Option func(*Engine)

// WithClock replaces time.Now, for tests that move time.
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.now = now } }

// WithLogger sets the logger; the default discards. The engine logs keys,
// queues and errors, never payloads or attribute values.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// New returns an engine over store and deliverer, or the policy's
// validation error.
func New(store Store, deliverer Deliverer, policy Policy, opts ...Option) (*Engine, error) {
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("invalid policy: %w", err)
	}
	e := &Engine{
		store:     store,
		deliverer: deliverer,
		policy:    policy,
		now:       time.Now,
		log:       slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		opt(e)
	}
	return e, nil
}

// Policy returns the engine's policy.
func (e *Engine) Policy() Policy { return e.policy }

// Sweep claims, delivers and settles due rows until nothing more is due, the
// row budget is spent, or ctx's deadline is within the policy's margin. Rows
// younger than the wake grace are left to the wake. A canceled ctx stops the
// sweep where it is: its claims stay held until their lease expires, exactly
// as if the process had crashed. The error is ctx's, if any.
func (e *Engine) Sweep(ctx context.Context) (Result, error) {
	return e.SweepPartition(ctx, Whole)
}

// SweepPartition is Sweep over the shards partition p owns: one of
// p.Count sweeps that run side by side without ever claiming the same row.
// A partition that does not fit the store's shards is an error, before
// any request.
func (e *Engine) SweepPartition(ctx context.Context, p Partition) (Result, error) {
	return e.SweepPartitions(ctx, time.Time{}, p)
}

// SweepPartitions is one sweep over the shards of every partition given
// (a scheduled sweep that also sweeps the partitions it could not hand
// off). Claims stop the deadline margin before the earlier of ctx's
// deadline and until (zero: ctx's alone), the time the next sweep of the
// same shards begins; the sends and settles of rows already claimed go on
// under ctx, as they would before a Lambda timeout.
func (e *Engine) SweepPartitions(ctx context.Context, until time.Time, ps ...Partition) (Result, error) {
	n := e.store.Shards()
	var shards []int
	for _, p := range ps {
		if err := p.Validate(n); err != nil {
			return Result{Stopped: "refused"}, err
		}
		shards = append(shards, p.Shards(n)...)
	}
	slices.Sort(shards)
	r := e.newRun(ctx, e.policy.WakeGrace)
	if !until.IsZero() {
		r.claimStop = until.Add(-e.policy.DeadlineMargin)
	}
	// The sweep's claims in flight adapt to throttling (see claimGate); its
	// store calls carry the gate so the adapter can report throttled
	// attempts its client retried itself (NoteThrottle).
	r.gate = newClaimGate(e.policy.Concurrency, e.now)
	return r.sweep(r.gate.with(ctx), slices.Compact(shards))
}

// sweep runs passes over shards until nothing more is claimed, the budget
// is spent or the run must stop.
func (r *run) sweep(ctx context.Context, shards []int) (Result, error) {
	r.ages.keep = keepRounds * int64(len(shards))
	source := r.queryShards(shards)
	for {
		before := r.t.claimed.Load()
		r.held.dropEnded(r.now())
		r.pass(ctx, source)
		r.recheck(ctx)
		r.nextInGroups(ctx)
		switch {
		case ctx.Err() != nil:
			return r.finish("canceled"), ctx.Err()
		case r.budgetSpent():
			return r.finish("budget"), nil
		case r.pastClaimStop():
			return r.finish("deadline"), nil
		case r.t.claimed.Load() == before:
			return r.finish("drained"), nil
		}
	}
}

// DeliverKeys is DeliverRefs for rows known by key alone.
func (e *Engine) DeliverKeys(ctx context.Context, keys []string) (Result, error) {
	refs := make([]DueRef, len(keys))
	for i, k := range keys {
		refs[i] = DueRef{Key: k}
	}
	return e.DeliverRefs(ctx, refs)
}

// DeliverRefs is the wake's targeted path: it claims, delivers and settles
// exactly the named rows, ignoring the wake grace. Rows that are not due, or
// that another worker holds, are counted as conflicts and left to the sweep.
// A ref that carries its row's stream Image, of an unordered row younger
// than the wake grace and never tried, is sent without a claim and settled
// with one write conditioned on the row being still as staged (pending,
// never claimed): the send's outcome, attempt 1, is recorded only if no
// sweep claimed the row meanwhile. A crash between send and settle
// records nothing: the sweep claims the row after the grace, and counts
// from there.
// A row of an ordered group goes only as its group's head: behind a
// predecessor in the same call it goes as soon as that one is delivered;
// behind one elsewhere, it is left to the sweep.
func (e *Engine) DeliverRefs(ctx context.Context, refs []DueRef) (Result, error) {
	r := e.newRun(ctx, 0)
	r.headWait, r.claimFree = e.policy.HeadWait, true
	seen := make(map[string]bool, len(refs))
	var unique []DueRef
	for _, ref := range refs {
		if !seen[ref.Key] {
			seen[ref.Key] = true
			unique = append(unique, ref)
		}
	}
	r.pass(ctx, r.emit(unique))
	r.nextInGroups(ctx)
	switch {
	case ctx.Err() != nil:
		return r.finish("canceled"), ctx.Err()
	case r.pastDeadline():
		// Rows may have been left unclaimed, or claimed and released: the
		// sweep delivers them, but the caller must not read "drained".
		return r.finish("deadline"), nil
	}
	return r.finish("drained"), nil
}

func (e *Engine) newRun(ctx context.Context, grace time.Duration) *run {
	r := &run{Engine: e, grace: grace, start: e.now(), order: newOrder()}
	r.oldest.Store(noDue)
	if d, ok := ctx.Deadline(); ok {
		r.stopAt = d.Add(-e.policy.DeadlineMargin)
	}
	r.budget.Store(int64(e.policy.RowBudget))
	return r
}

// failure is the error history to store after an attempt fails; its
// entry is unsure unless err is definite (see Definite), its message
// the service's error code first (ErrorText).
func (e *Engine) failure(row Row, now time.Time, err error) []AttemptError {
	return row.withError(AttemptError{At: now, Attempt: row.Attempt, Message: ErrorText(err), Unsure: !Definite(err)})
}

// unsureAfter is row after an attempt that failed at now with err: its
// UnsureAt moved to now unless err is definite. A request of unknown
// outcome can land long after a later attempt failed definitely, so the
// row keeps the time whatever comes after.
func unsureAfter(row Row, now time.Time, err error) Row {
	if !Definite(err) {
		row.UnsureAt = now
	}
	return row
}

// errMalformed prefixes the reason of rows that cannot be read.
var errMalformed = errors.New("malformed")
