package operate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Selection is the dead letters a bulk action takes when no keys are
// named: those of Queue (empty: of every queue) that failed more than
// OlderThan ago.
type Selection struct {
	Queue     string
	OlderThan time.Duration
}

// EachKey calls fn with each key of the rows named: keys, if any, else
// the dead letters sel selects that were dead at now, page by page as the
// dead index is read, so that no list of them all is ever held.
func EachKey(ctx context.Context, op *dynamo.Operator, keys []string, sel Selection, now time.Time, fn func(string) error) error {
	if len(keys) > 0 {
		for _, k := range keys {
			if err := fn(k); err != nil {
				return err
			}
		}
		return nil
	}
	// Only rows dead before the run began: a row redriven here that fails
	// again comes back with a later failed_at, behind the scan's cursor,
	// and would be taken again, and again (found by review 17c).
	q := dynamo.DeadQuery{Queue: sel.Queue, Before: now}
	if sel.OlderThan > 0 {
		q.Before = q.Before.Add(-sel.OlderThan)
	}
	return op.EachDead(ctx, q, func(d dynamo.DeadRef) error { return fn(d.Key) })
}

// Result is what a redrive or purge did.
type Result struct {
	Action  string `json:"action"`
	DryRun  bool   `json:"dry_run,omitempty"`
	Done    int    `json:"done"`
	Skipped int    `json:"skipped"`
	// Held counts the dead letters a purge left because a send of theirs
	// may still land (see HeldError); HeldUntil is when the last of those
	// windows closes, rounded up to the second.
	Held      int       `json:"held,omitempty"`
	HeldUntil time.Time `json:"held_until,omitzero"`
	// MayHaveClosed counts the dead letters a redrive left because the
	// message closing their place may have reached the consumer
	// (dynamo.MayHaveClosedError): redriven, they could arrive after their
	// place was closed, to be recorded late and applied nowhere.
	MayHaveClosed int      `json:"may_have_closed,omitempty"`
	Keys          []string `json:"keys,omitempty"`
	// OlderThan is --older-than, when given: younger dead letters were
	// not selected, and the report says so rather than let a 0 look like
	// an empty table.
	OlderThan string `json:"older_than,omitempty"`
}

// HeldError is a purge that did not delete a dead letter because a send
// of it ended unsure (its outcome unknown: a timeout, a crash) too
// recently: a copy may still land until Until. On an ordered route a
// purged head lets its group go at once, and that copy would land behind
// its successors; the dispatcher itself waits the same window before
// passing an unsure dead head under skip.
type HeldError struct {
	Key   string
	Until time.Time
}

// Error says which row and until when.
func (e *HeldError) Error() string {
	return fmt.Sprintf("%s: held: a send of it may still land until %s", e.Key, e.Until.UTC().Format(time.RFC3339))
}

// Apply runs act on every key each gives (8 at a time, as each reads
// them), counting refused writes as skipped (the row was not a dead
// letter) and HeldErrors as held, and calls step after each key, under a
// lock. The keys stream from each to the workers: memory stays the same
// whatever their number.
// An error reading the keys stops the run; errors of act do not.
func Apply(ctx context.Context, action string, each func(fn func(string) error) error, act func(context.Context, string) error, step func()) (Result, error) {
	res := Result{Action: action}
	var mu sync.Mutex
	var errs []error
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range keys {
				err := act(ctx, k)
				mu.Lock()
				var conflict *outbox.ConflictError
				var held *HeldError
				var closed *dynamo.MayHaveClosedError
				switch {
				case err == nil:
					res.Done++
				case errors.As(err, &closed):
					res.MayHaveClosed++
				case errors.As(err, &held):
					res.Held++
					// Rounded up: a purge at the time reported goes.
					if until := held.Until.Add(time.Second - 1).Truncate(time.Second).UTC(); until.After(res.HeldUntil) {
						res.HeldUntil = until
					}
				case errors.As(err, &conflict):
					res.Skipped++
				default:
					errs = append(errs, err)
				}
				if step != nil {
					step()
				}
				mu.Unlock()
			}
		})
	}
	err := each(func(k string) error {
		select {
		case keys <- k:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(keys)
	wg.Wait()
	if err != nil {
		errs = append([]error{fmt.Errorf("read dead letters: %w", err)}, errs...)
	}
	return res, errors.Join(errs...)
}

// Redrive returns the rows named to pending with a fresh budget, due now:
// the conditional write of dynamo.Store.Redrive, which moves only rows
// still failed, and not those whose place's closing message may have
// reached the consumer (counted as MayHaveClosed).
func Redrive(ctx context.Context, op *dynamo.Operator, keys []string, sel Selection, now time.Time, step func()) (Result, error) {
	each := func(fn func(string) error) error { return EachKey(ctx, op, keys, sel, now, fn) }
	return Apply(ctx, "redrive", each, func(ctx context.Context, k string) error { return op.Redrive(ctx, k, now) }, step)
}

// RedriveLate is Redrive that moves too the rows whose place's closing
// message may have reached the consumer (dynamo.Store.RedriveLate): the
// operator knows they may arrive after their place was closed.
func RedriveLate(ctx context.Context, op *dynamo.Operator, keys []string, sel Selection, now time.Time, step func()) (Result, error) {
	each := func(fn func(string) error) error { return EachKey(ctx, op, keys, sel, now, fn) }
	return Apply(ctx, "redrive", each, func(ctx context.Context, k string) error { return op.RedriveLate(ctx, k, now) }, step)
}

// Hold is how a purge holds back dead letters a late copy of which may
// still land: those a send of which ended unsure (unsure_at) less than Wait
// before Now.
type Hold struct {
	// Now is when the purge runs (not when the operator chose the rows:
	// a confirmation pressed late counts from the press).
	Now time.Time
	// Wait is the dispatcher's outbox.Policy.UnsureWait (see HoldWait).
	Wait time.Duration
}

// HoldWait is the wait a purge holds for, given the one the dispatcher
// published (zero: none): it, when a valid policy can give it, else the
// longest any can, outbox.MaxUnsureWait. A value out of that range was
// not written by a dispatcher, and a shorter wait than the real one would
// purge a row whose copy may still land.
func HoldWait(published time.Duration) time.Duration {
	if published < outbox.MinUnsureWait || published > outbox.MaxUnsureWait {
		return outbox.MaxUnsureWait
	}
	return published
}

// Purge deletes the rows named that are failed, and failed at or before
// chosen (the moment the operator chose them): the conditional delete of
// dynamo.Operator.Purge. A row that failed again since is skipped. A row
// a send of which ended unsure within hold.Wait of hold.Now is held: not
// deleted, counted apart, to be purged once the window has passed.
func Purge(ctx context.Context, op *dynamo.Operator, keys []string, sel Selection, chosen time.Time, hold Hold, step func()) (Result, error) {
	each := func(fn func(string) error) error { return EachKey(ctx, op, keys, sel, chosen, fn) }
	unsureBy := hold.Now.Add(-hold.Wait)
	// An unsure_at further ahead than any dispatcher's clock can be was
	// not written by one: it would hold its row, and its group, for ever.
	implausible := hold.Now.Add(outbox.MaxUnsureWait)
	res, err := Apply(ctx, "purge", each, func(ctx context.Context, k string) error {
		err := op.Purge(ctx, k, hold.Now, chosen, dynamo.UnsureBound{By: unsureBy, Implausible: implausible})
		var conflict *outbox.ConflictError
		if errors.As(err, &conflict) {
			// Refused: held only if the unsure send is the sole reason (a
			// row that failed again since the operator chose it is skipped).
			if cur := conflict.Current; cur != nil && cur.Status == outbox.StatusFailed && !cur.FailedAt.After(chosen) && cur.UnsureAt.After(unsureBy) {
				return &HeldError{Key: k, Until: cur.UnsureAt.Add(hold.Wait)}
			}
		}
		return err
	}, step)
	if sel.OlderThan > 0 {
		res.OlderThan = sel.OlderThan.String()
	}
	return res, err
}
