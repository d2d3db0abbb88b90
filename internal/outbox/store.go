package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store is where rows live. Every method that changes a row is one
// conditional write; when the condition does not hold it returns a
// *ConflictError, which is information rather than failure.
type Store interface {
	// Shards is the number of due-index partitions to query, 0..Shards-1.
	Shards() int
	// QueryDue returns up to limit entries of one shard due at or before
	// now, oldest first, starting after the given entry (nil: from the
	// start). more reports whether the shard may hold further entries.
	QueryDue(ctx context.Context, shard int, now time.Time, after *DueRef, limit int) (refs []DueRef, more bool, err error)
	// Claim takes the row for one attempt: it must be due, below the
	// budget, and pending or claimed under an expired lease. It returns the
	// claimed row with its new token, attempt and lease.
	Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (Row, error)
	// Done settles a delivered row; it needs the row's current token. For
	// a row sent Unclaimed, Done, Retry and DeadLetter need instead that
	// the row is still as staged: pending at attempt 0, never claimed,
	// never redriven, with the row's created_at and due_at. Retry and
	// DeadLetter then store the row's Attempt too.
	Done(ctx context.Context, row Row, now time.Time) error
	// Retry returns a claimed row to pending, due at dueAt, with the
	// attempt kept and the error history replaced by history.
	Retry(ctx context.Context, row Row, dueAt time.Time, history []AttemptError) error
	// DeadLetter marks a claimed row failed with the given history.
	DeadLetter(ctx context.Context, row Row, now time.Time, history []AttemptError) error
	// Close returns a claimed row that is to be dead-lettered on a route
	// whose groups go past their dead letters (skip) to pending, as the
	// message that closes its place: Closed set to ClosedDeadLetter, due
	// at dueAt, with a fresh budget (attempt 0) and the history replaced
	// by history. Once that message is sent, DeadLetter settles it.
	Close(ctx context.Context, row Row, dueAt time.Time, history []AttemptError) error
	// Release returns a claimed, never-sent row to pending with its attempt
	// restored, in the due index.
	Release(ctx context.Context, row Row) error
	// Index puts an Unindexed row the wake sent Unclaimed, or left unsent,
	// into the due index as it is, so a sweep finds it: the one write that
	// hands a lean row the wake could not settle to the sweep's retries.
	// It needs the row still as staged, as an unclaimed settle does.
	Index(ctx context.Context, row Row) error
	// Expire marks failed a row that can no longer be claimed because its
	// budget is spent (see the state machine). row is its current state.
	Expire(ctx context.Context, row Row, now time.Time, maxAttempts int, history []AttemptError) error
	// Quarantine dead-letters an item in the due index that is not a
	// readable row, so it stops being queried. It must not touch valid rows.
	Quarantine(ctx context.Context, key string, now time.Time, reason string) error
	// Link reads what the ordered-group head check needs of one row, with
	// a strongly consistent read; a missing row is a Link with Found unset.
	Link(ctx context.Context, key string) (Link, error)
}

// ErrDeadLettered is wrapped by the error of a store that could not make
// the asked-for write, because the row could never take it (its item is
// too large), and dead-lettered the row instead, with the reason. The
// engine counts it as a dead letter.
var ErrDeadLettered = errors.New("dead-lettered by the store")

// ConflictError reports that a conditional write did not apply.
type ConflictError struct {
	// Key is the row the write was for.
	Key string
	// Op names the transition that was refused.
	Op string
	// Current is the row as the store saw it when it refused the write, or
	// nil if the row does not exist or could not be read.
	Current *Row
	// Malformed, when set, says why an existing item could not be read.
	Malformed string
}

// Error says which write was refused and what the row was instead.
func (e *ConflictError) Error() string {
	switch {
	case e.Malformed != "":
		return fmt.Sprintf("%s %s: condition failed on malformed item: %s", e.Op, e.Key, e.Malformed)
	case e.Current == nil:
		return fmt.Sprintf("%s %s: condition failed: no such row", e.Op, e.Key)
	default:
		return fmt.Sprintf("%s %s: condition failed: row is %s at attempt %d", e.Op, e.Key, e.Current.Status, e.Current.Attempt)
	}
}
