package outbox

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// ThrottledError marks a store call the service refused for capacity: a
// shard of the due index, the table or the account was over its write
// rate, or the client's retry quota for such refusals was spent. The write
// did not apply. Adapters classify their service's errors (the engine
// imports no AWS) and wrap them with Throttled.
type ThrottledError struct{ Err error }

// Error returns the underlying error's message.
func (e *ThrottledError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ThrottledError) Unwrap() error { return e.Err }

// Throttled wraps err, a refusal for capacity, so the engine backs off:
// a sweep lowers its claim concurrency, and a settle is tried again.
func Throttled(err error) error { return &ThrottledError{Err: err} }

// IsThrottled reports whether err, or any error it wraps, is a throttle.
func IsThrottled(err error) bool {
	var t *ThrottledError
	return errors.As(err, &t)
}

// NoteThrottle tells the run that made the call under ctx that one attempt
// of it was throttled, including an attempt the adapter's client retried
// on its own and that never reaches the engine as an error: a throttle is
// the signal to slow down, whether or not the request in the end went
// through. It does nothing under a context no sweep gave.
func NoteThrottle(ctx context.Context) {
	if g, ok := ctx.Value(claimGateKey{}).(*claimGate); ok {
		g.throttled()
	}
}

// Settle retries: a done, retry or dead-letter write refused for
// throttling is tried again while the row's lease lasts, after a delay
// that starts at settleBackoffBase and doubles up to settleBackoffMax,
// each spread over [d/2, d). A settle given up leaves its row claimed
// until the lease ends, when another sweep sends it again: the retries
// are cheaper than that second send.
const (
	settleBackoffBase = 250 * time.Millisecond
	settleBackoffMax  = 8 * time.Second
)

// settleWrite runs write, a settle of row, and again while the store
// refuses it for throttling and a retry can begin before row's lease
// ends; it returns the last error. Each throttle counts in Result.Throttled.
func (r *run) settleWrite(ctx context.Context, row Row, write func() error) error {
	delay, until := settleBackoffBase, row.LeaseUntil
	if row.Unclaimed {
		// The wake's unclaimed send has no lease; its grace plays the
		// part: past it a sweep may claim the row and send it again.
		until = row.CreatedAt.Add(r.policy.WakeGrace)
	}
	for {
		err := write()
		if !IsThrottled(err) {
			return err
		}
		r.t.throttled.Add(1)
		NoteThrottle(ctx)
		wait := delay/2 + rand.N(delay/2)
		if ctx.Err() != nil || !r.now().Add(wait).Before(until) {
			return err
		}
		r.log.InfoContext(ctx, "settle throttled: trying again", "key", row.Key, "after", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		delay = min(2*delay, settleBackoffMax)
	}
}
