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
func TestAdv50_ALateRedriveThatFailsAgainForgetsItsPlaceMayHaveBeenClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p := keys[0]
	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 1
	var closings atomic.Int32
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		switch {
		case r.Key == p && r.Closed == "":
			return outbox.Permanent(errors.New("injected: refused for good"))
		case r.Key == p && closings.Add(1) == 1:
			// The first closing message: a timeout, SQS may have stored it.
			return errors.New("injected: send timed out")
		case r.Key == p:
			return outbox.Permanent(errors.New("injected: queue refused the closing message"))
		}
		return nil
	}}
	sweep := func() {
		t.Helper()
		_, err := h.engine(t, policy, log).Sweep(ctx)
		require.NoError(t, err)
		h.clock.Advance(policy.UnsureWait() + time.Minute)
	}
	for range 3 {
		sweep()
	}
	require.Equal(t, outbox.ClosedUnsure, h.row(t, p).Closed, "the first closing message may have landed")
	var refused *dynamo.MayHaveClosedError
	require.ErrorAs(t, h.store.Redrive(ctx, p, h.clock.Now()), &refused, "a plain redrive is refused")

	require.NoError(t, h.store.RedriveLate(ctx, p, h.clock.Now()))
	for range 4 {
		sweep()
	}
	row := h.row(t, p)
	require.Equal(t, outbox.StatusFailed, row.Status)
	require.Equal(t, int32(2), closings.Load(), "two closing messages were tried")
	require.True(t, outbox.MayHaveClosed(row.Closed),
		"closed %q: the first closing message may still have closed p's place at the consumer", row.Closed)
	require.ErrorAs(t, h.store.Redrive(ctx, p, h.clock.Now()), &refused,
		"a plain redrive would promise p goes in a place the consumer may have closed")
}
