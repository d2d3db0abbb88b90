package outbox

import (
	"sync/atomic"
	"time"
)

// Result counts what one sweep or wake did to rows.
type Result struct {
	// Claimed rows this run took, including ones later released.
	Claimed int
	// Delivered rows were sent and settled done (or sent, with a failed
	// settle counted under Errors: they will be sent again).
	Delivered int
	// Retried rows failed an attempt and wait for their backoff.
	Retried int
	// DeadLettered rows are now failed: permanent error, spent budget or
	// unreadable.
	DeadLettered int
	// Unrouted counts failed attempts of rows whose queue the deliverer
	// has no route for (UnroutedError), retried or, with the budget spent,
	// dead-lettered: each counts in Retried or DeadLettered too.
	Unrouted int
	// Unplaced counts rows of a route listed as ordered that were staged
	// with no place in a group (a producer that does not list the route as
	// ordered, or another language's): each is delivered, in no order.
	Unplaced int
	// Unclaimed rows the wake sent without a claim, from their stream
	// image, and settled with one conditional write (see DeliverRefs).
	Unclaimed int
	// Released rows were claimed but not sent before the deadline margin.
	Released int
	// Indexed counts unindexed (lean) rows the wake sent unclaimed or left
	// unsent and could not settle, which it put into the due index for
	// the sweep instead (Store.Index).
	Indexed int
	// Expired rows lost their final claim (crash or timeout) and failed.
	Expired int
	// Skipped rows were due but left alone: younger than the wake grace.
	Skipped int
	// Conflicts are refused conditional writes: another worker had the
	// row, or it had already moved on.
	Conflicts int
	// Waiting rows of ordered groups were due but left alone: their
	// predecessor was not settled yet.
	Waiting int
	// BlockedGroups counts the ordered groups found held by a dead-lettered
	// head under the block policy; OldestBlockedAge is how long the oldest
	// of those heads had been dead when the run began.
	BlockedGroups    int
	OldestBlockedAge time.Duration
	// Errors are store calls that failed outright; the rows involved are
	// recovered by a later sweep once their lease expires.
	Errors int
	// Throttled counts store calls that reached the engine refused for
	// capacity (ThrottledError), a settle's retries included: a settle
	// retried until it applied is not an error.
	Throttled int
	// ClaimConcurrency is the least claim concurrency a sweep backed off
	// to on throttling (Policy.Concurrency if it never did); 0 for the
	// wake.
	ClaimConcurrency int
	// OldestDueAge is how overdue the oldest due row was when the sweep
	// began: the backlog lag. Zero for the wake and for an empty backlog.
	OldestDueAge time.Duration
	// Duration is the wall time of the run.
	Duration time.Duration
	// Stopped says why a sweep ended: "drained", "budget", "deadline" or
	// "canceled" ("refused" when a function would not run it: its
	// configuration is unsafe for the invocation's deadline).
	Stopped string
}

// tally is the concurrent counterpart of Result.
type tally struct {
	claimed, delivered, retried, deadLettered, released atomic.Int64
	expired, skipped, conflicts, errors, unrouted       atomic.Int64
	throttled, unclaimed, unplaced, indexed             atomic.Int64
}

func (t *tally) result() Result {
	return Result{
		Claimed:      int(t.claimed.Load()),
		Delivered:    int(t.delivered.Load()),
		Retried:      int(t.retried.Load()),
		DeadLettered: int(t.deadLettered.Load()),
		Unclaimed:    int(t.unclaimed.Load()),
		Released:     int(t.released.Load()),
		Indexed:      int(t.indexed.Load()),
		Unrouted:     int(t.unrouted.Load()),
		Unplaced:     int(t.unplaced.Load()),
		Expired:      int(t.expired.Load()),
		Skipped:      int(t.skipped.Load()),
		Conflicts:    int(t.conflicts.Load()),
		Errors:       int(t.errors.Load()),
		Throttled:    int(t.throttled.Load()),
	}
}
