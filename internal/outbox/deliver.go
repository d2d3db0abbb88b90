package outbox

import (
	"context"
	"errors"
)

// Deliverer sends rows to their queue.
type Deliverer interface {
	// Deliver sends rows that all name the same queue and returns one error
	// per row, in order: nil when the row was accepted. An error wrapped
	// with Permanent will never succeed on retry; any other error is
	// retried with backoff. Deliver may split the rows into several
	// requests; it must not return fewer errors than rows.
	Deliver(ctx context.Context, queue string, rows []Row) []error
}

// PermanentError marks a delivery failure that retrying cannot fix, such as
// an unknown route or a message the queue rejects as invalid.
type PermanentError struct{ Err error }

// Error returns the underlying error's message.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so the engine dead-letters the row at once.
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err, or any error it wraps, is permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// RefusedError marks a failure the target answered for the row itself: it
// looked at the row's entry and did not accept it (a per-entry failure in
// a batch answer). The row was certainly not stored, so a late copy of it
// can never arrive.
type RefusedError struct{ Err error }

// Error returns the underlying error's message.
func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *RefusedError) Unwrap() error { return e.Err }

// Refused wraps err, a failure the target answered for the row's own
// entry, so the engine knows the row was not stored.
func Refused(err error) error { return &RefusedError{Err: err} }

// Definite reports whether a failed send's err says for certain that the
// target did not store the row: a permanent error (the row was refused, or
// never sent), a per-entry refusal (Refused), or no route (Unrouted: no
// request was made). Any other error leaves the
// outcome unknown: a timeout, a reset connection, a 5xx or a throttle of
// the whole request, or an answer that left the row out. The target may
// have stored such a request, and may store it later than the client gave
// up on it.
func Definite(err error) bool {
	var r *RefusedError
	return IsPermanent(err) || errors.As(err, &r) || IsUnrouted(err)
}
