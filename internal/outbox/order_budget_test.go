package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// TestOrdered_ABlockedGroupOnAnUnlistedRouteDoesNotSpendEverySweepsBudget:
// on a route the producer orders but OUTFLOW_ORDERED does not list (the
// docs: "order holds either way, at the price of a claim and a release"),
// every waiting row is claimed before it is checked, and each claim takes
// one unit of RowBudget. A group blocked by a dead head (block is the
// default for unlisted routes) with at least RowBudget rows waiting behind
// it therefore spends the whole budget of every sweep on claims it
// releases at once. The due index is oldest first, and the blocked rows
// are the oldest, so every sweep stops at "budget" before it reaches any
// newer row: every other row the sweep should deliver (retries, rows the
// wake missed, delayed rows), on any route, waits for ever.
//
// Violated: invariant 2 (a blocked group holds only itself; nothing else
// waits). On a listed route the same group costs no budget (its rows are
// checked before any claim).
//
// Scaled down: RowBudget 4, five rows behind the dead head, one shard (so
// the due order is the order the sweep claims in).
func TestOrdered_ABlockedGroupOnAnUnlistedRouteDoesNotSpendEverySweepsBudget(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	store, clk := h.store, h.clock
	ctx := context.Background()

	var keys []string
	for i := range 6 {
		key := "g-" + strconv.Itoa(i)
		keys = append(keys, key)
		require.NoError(t, store.StageOrdered(ctx, outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(key)}, clk.Now()))
	}
	// A newer row of another route, due after the group's rows.
	clk.Advance(time.Second)
	require.NoError(t, store.Stage(ctx, outbox.Row{Key: "u", Queue: "orders", Payload: []byte("u")}, clk.Now()))

	policy := testPolicy() // events.fifo is not listed
	policy.RowBudget = 4
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		if r.Key == keys[0] {
			return outbox.Permanent(errors.New("injected: refused for good"))
		}
		return nil
	}}
	e, err := outbox.New(store, log, policy, outbox.WithClock(clk.Now))
	require.NoError(t, err)

	var stops []string
	for range 4 {
		clk.Advance(time.Minute)
		res, err := e.Sweep(ctx)
		require.NoError(t, err)
		stops = append(stops, res.Stopped)
	}
	got, err := store.Get(ctx, "u")
	require.NoError(t, err)
	require.Nil(t, got, "the unordered row was never delivered: every sweep spent its budget claiming and releasing the blocked group's rows (stopped %v)", stops)
}
