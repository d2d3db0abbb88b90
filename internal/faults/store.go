package faults

import (
	"context"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Store wraps a store with write faults on every transition that follows
// a send, throttling and delays.
type Store struct {
	outbox.Store
	Plan *Plan
}

func (s Store) before(ctx context.Context, op string, row outbox.Row) error {
	if s.Plan.Hit(Delay, op, row.Key, row.Attempt) {
		select {
		case <-time.After(s.Plan.MaxDelay):
		case <-ctx.Done():
		}
	}
	kind := Kind("")
	switch {
	case s.Plan.Hit(Throttle, op, row.Key, row.Attempt):
		kind = Throttle
	case s.Plan.Hit(SettleBefore, op, row.Key, row.Attempt):
		kind = SettleBefore
	default:
		return nil
	}
	if op == "done" {
		s.Plan.MarkDuplicateWindow(row.Key) // sent, still claimed: sent again after the lease
	}
	return injected(kind)
}

func (s Store) after(op string, row outbox.Row, err error) error {
	if err == nil && s.Plan.Hit(SettleAfter, op, row.Key, row.Attempt) {
		return injected(SettleAfter)
	}
	return err
}

// Claim implements outbox.Store; a claim can be applied yet reported
// failed, which loses the attempt like a crash.
func (s Store) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	if s.Plan.Hit(Throttle, "claim", key, s.Plan.nth("claim "+key)) {
		return outbox.Row{}, injected(Throttle)
	}
	row, err := s.Store.Claim(ctx, key, now, lease, maxAttempts)
	if err == nil && s.Plan.Hit(ClaimAmbiguous, key, row.Attempt) {
		return outbox.Row{}, injected(ClaimAmbiguous)
	}
	return row, err
}

// Done implements outbox.Store.
func (s Store) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	if err := s.before(ctx, "done", row); err != nil {
		return err
	}
	return s.after("done", row, s.Store.Done(ctx, row, now))
}

// Retry implements outbox.Store.
func (s Store) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	if err := s.before(ctx, "retry", row); err != nil {
		return err
	}
	return s.after("retry", row, s.Store.Retry(ctx, row, dueAt, history))
}

// Close implements outbox.Store.
func (s Store) Close(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	if err := s.before(ctx, "retry", row); err != nil {
		return err
	}
	return s.after("retry", row, s.Store.Close(ctx, row, dueAt, history))
}

// DeadLetter implements outbox.Store.
func (s Store) DeadLetter(ctx context.Context, row outbox.Row, now time.Time, history []outbox.AttemptError) error {
	if err := s.before(ctx, "dead-letter", row); err != nil {
		return err
	}
	return s.after("dead-letter", row, s.Store.DeadLetter(ctx, row, now, history))
}

// Release implements outbox.Store.
func (s Store) Release(ctx context.Context, row outbox.Row) error {
	if err := s.before(ctx, "release", row); err != nil {
		return err
	}
	return s.after("release", row, s.Store.Release(ctx, row))
}

// Index implements outbox.Store.
func (s Store) Index(ctx context.Context, row outbox.Row) error {
	if err := s.before(ctx, "index", row); err != nil {
		return err
	}
	return s.after("index", row, s.Store.Index(ctx, row))
}

// Link implements outbox.Store; the head check's read can be throttled.
func (s Store) Link(ctx context.Context, key string) (outbox.Link, error) {
	if s.Plan.Hit(Throttle, "link", key, s.Plan.nth("link "+key)) {
		return outbox.Link{}, injected(Throttle)
	}
	return s.Store.Link(ctx, key)
}
