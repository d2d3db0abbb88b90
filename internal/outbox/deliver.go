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
