package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// TestOrdered_ADeadPredecessorOnASkipRouteDoesNotReleaseARowOfABlockRoute:
// which dead-head policy applies to a row depends on the path that decides.
//
// The head check (Engine.settles) applies the successor's route policy: a
// row of a block route whose predecessor is a dead letter is blocked,
// whatever route the predecessor was on. But when the run itself
// dead-letters the predecessor, settle applies the predecessor's route
// policy (deadSettles(row) looks at the dead row's queue): under skip it
// marks the predecessor settled and the rows parked behind it go at once,
// without any check. A row of a block route is then sent past a dead
// letter: the very thing block forbids. A fresh sweep, reading the same
// state, blocks it.
//
// Rows reach this shape when a producer in another language chains a group
// across two routes (architecture.md: "A producer in another language
// writes the same two items"); Link reads the predecessor's queue and the
// engine ignores it.
//
// Violated: invariant 3 (block holds until redrive or purge), and the rule
// that the same stored state gives the same decision on every path.
func TestOrdered_ADeadPredecessorOnASkipRouteDoesNotReleaseARowOfABlockRoute(t *testing.T) {
	t.Parallel()
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: awstest.NewTable(t), Shards: 1})
	require.NoError(t, err)
	routes := delivery.Routes{"skip.fifo": awstest.NewQueue(t, true), "block.fifo": awstest.NewQueue(t, true)}
	clk := newClock()
	ctx := context.Background()

	p := outbox.Row{Key: "p", Queue: "skip.fifo", Group: "g", Payload: []byte(`{"n":1}`), Seq: 1}
	s := outbox.Row{Key: "s", Queue: "block.fifo", Group: "g", Payload: []byte(`{"n":2}`), Seq: 2, Prev: "p"}
	require.NoError(t, store.Stage(ctx, p, clk.Now()))
	require.NoError(t, store.Stage(ctx, s, clk.Now()))

	policy := testPolicy()
	policy.Ordered = map[string]outbox.DeadHead{"skip.fifo": outbox.DeadHeadSkip, "block.fifo": outbox.DeadHeadBlock}
	log := &sendLog{next: sqsRouter(t, awstest.SQS(t), routes), fail: func(r outbox.Row) error {
		if r.Key == "p" && r.Closed == "" { // the row, not its place's closing message
			return outbox.Permanent(errors.New("injected: refused for good"))
		}
		return nil
	}}
	e, err := outbox.New(store, log, policy, outbox.WithClock(clk.Now))
	require.NoError(t, err)

	// One sweep: p is dead-lettered (its route skips), and s, parked
	// behind it, goes without a check. (Staged with s not yet due, so that
	// the sweep that kills p never sees s, a later sweep's check reports
	// the group blocked and leaves s: the reviewer checked both.)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLettered)
	require.Equal(t, 0, res.Delivered, "s, a row of a block route, was sent past its dead predecessor (dead-lettered on a skip route in the same run); a fresh check blocks it")
	clk.Advance(time.Minute)
	res, err = e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.BlockedGroups)
}
