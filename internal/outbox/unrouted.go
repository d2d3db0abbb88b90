package outbox

import (
	"errors"
	"fmt"
)

// UnroutedError is a send that never left: the dispatcher has no route
// for the row's queue. It is retried with backoff, not dead-lettered at
// once, because a missing route is most often the dispatcher's mistake
// (a deploy or a manual sweep with a route left out), not the row's: the
// row is dead-lettered, with this reason, only when its attempt budget is
// spent. Nothing was sent, so the failure is definite (see Definite) and
// never holds an ordered group for UnsureWait.
type UnroutedError struct{ Queue string }

// Error names the queue the dispatcher has no route for.
func (e *UnroutedError) Error() string { return fmt.Sprintf("no route for queue %q", e.Queue) }

// Unrouted is the error of a row whose queue has no route.
func Unrouted(queue string) error { return &UnroutedError{Queue: queue} }

// IsUnrouted reports whether err, or any error it wraps, is an
// UnroutedError.
func IsUnrouted(err error) bool {
	var u *UnroutedError
	return errors.As(err, &u)
}
