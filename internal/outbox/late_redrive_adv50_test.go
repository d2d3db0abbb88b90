package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Review of issue 50 (R50-4), adopted (fixed by outbox.Row.PlaceMaybeClosed, set by
// Store.RedriveLate and read by ClosingFailed): "may have closed" was forgotten after a late
// redrive that fails again. p, a skip dead letter, had its place's
// closing message fail for good after a send whose outcome was unknown:
// closed = unsure (it may have reached the consumer, which then closed
// place 1). The operator redrives it as late (dead redrive --late, the
// way the refusal offers), the target still refuses it, and the sweep
// closes its place again; that second closing message is refused for
// certain. ClosingFailed then compares unsure_at (the first closing
// message's unsure send) with the last recorded error (the row's own new
// failure, later) and writes closed = unsent: "its closing message was
// not sent, a redrive sends the row in its place". But the first closing
// message may still have closed place 1 at the consumer, and a plain
// redrive is now accepted: the row reaches a GapWait consumer after its
// place was closed, is recorded late and applied nowhere, and the
// dispatcher settles it done (A5-3 again, one redrive later).
// unsurePlace is group g of two rows on a skip route whose first, p, is
// refused for good and whose place's closing messages fail: the first
// with a timeout (SQS may have stored it), every later one for certain.
// Swept three times, p is a dead letter whose place may be closed at the
// consumer (closed = unsure).
type unsurePlace struct {
	h      *harness
	p      string
	policy outbox.Policy
	// closings counts the closing messages of p tried.
	closings atomic.Int32
	// throttled, once set, has p's own sends refused for now (to be
	// retried) rather than for good.
	throttled atomic.Bool
	log       *sendLog
}

func newUnsurePlace(t *testing.T) *unsurePlace {
	t.Helper()
	u := &unsurePlace{h: newHarnessShards(t, 1), policy: orderedPolicy(outbox.DeadHeadSkip)}
	u.p = u.h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"][0]
	u.policy.MaxAttempts = 1
	u.log = &sendLog{next: u.h.sqs, fail: func(r outbox.Row) error {
		switch {
		case r.Key == u.p && r.Closed == "" && u.throttled.Load():
			return outbox.Refused(errors.New("injected: throttled, try again"))
		case r.Key == u.p && r.Closed == "":
			return outbox.Permanent(errors.New("injected: refused for good"))
		case r.Key == u.p && u.closings.Add(1) == 1:
			// The first closing message: a timeout, SQS may have stored it.
			return errors.New("injected: send timed out")
		case r.Key == u.p:
			return outbox.Permanent(errors.New("injected: queue refused the closing message"))
		}
		return nil
	}}
	for range 3 {
		u.sweep(t)
	}
	require.Equal(t, outbox.ClosedUnsure, u.h.row(t, u.p).Closed, "the first closing message may have landed")
	return u
}

// sweep runs one sweep under u.policy, then moves the clock past the
// wait for any unsure send to land.
func (u *unsurePlace) sweep(t *testing.T) {
	t.Helper()
	_, err := u.h.engine(t, u.policy, u.log).Sweep(context.Background())
	require.NoError(t, err)
	u.h.clock.Advance(u.policy.UnsureWait() + time.Minute)
}

func TestAdv50_ALateRedriveThatFailsAgainForgetsItsPlaceMayHaveBeenClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUnsurePlace(t)
	h, p := u.h, u.p
	var refused *dynamo.MayHaveClosedError
	require.ErrorAs(t, h.store.Redrive(ctx, p, h.clock.Now()), &refused, "a plain redrive is refused")

	require.NoError(t, h.store.RedriveLate(ctx, p, h.clock.Now()))
	for range 4 {
		u.sweep(t)
	}
	row := h.row(t, p)
	require.Equal(t, outbox.StatusFailed, row.Status)
	require.Equal(t, int32(2), u.closings.Load(), "two closing messages were tried")
	require.True(t, outbox.MayHaveClosed(row.Closed),
		"closed %q: the first closing message may still have closed p's place at the consumer", row.Closed)
	require.ErrorAs(t, h.store.Redrive(ctx, p, h.clock.Now()), &refused,
		"a plain redrive would promise p goes in a place the consumer may have closed")
}
