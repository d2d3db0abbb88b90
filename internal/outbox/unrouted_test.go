package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestSweep_UnroutedRowIsRetriedThenDeadLetteredWhenItsBudgetIsSpent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t,
		outbox.Row{Key: "unrouted", Queue: "nowhere", Payload: []byte("x")},
		outbox.Row{Key: "fine", Queue: "orders", Payload: []byte("x")},
	)
	policy := testPolicy()
	e := h.engine(t, policy, nil)
	for attempt := 1; attempt <= policy.MaxAttempts; attempt++ {
		res, err := e.Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, res.Unrouted, "attempt %d is counted as unrouted: %+v", attempt, res)
		got := h.row(t, "unrouted")
		require.Equal(t, attempt, got.Attempt)
		require.Equal(t, `no route for queue "nowhere"`, got.LastError)
		require.True(t, got.UnsureAt.IsZero(), "attempt %d: nothing was sent, so the row is never unsure", attempt)
		require.False(t, got.Errors[len(got.Errors)-1].Unsure, "attempt %d", attempt)
		if attempt < policy.MaxAttempts {
			require.Equal(t, outbox.StatusPending, got.Status, "attempt %d of %d is retried, not dead-lettered", attempt, policy.MaxAttempts)
			require.Equal(t, 1, res.Retried)
			require.Zero(t, res.DeadLettered)
			h.clock.Advance(policy.BackoffMax + time.Second)
			continue
		}
		require.Equal(t, outbox.StatusFailed, got.Status, "dead-lettered once its budget is spent")
		require.Equal(t, 1, res.DeadLettered)
		require.Zero(t, res.Retried)
	}
	h.gone(t, "fine")
}

// A dead head of an ordered group under skip holds its successor for
// UnsureWait only if one of its sends may still land; an unrouted head
// never sent anything, so it is no unsure wait that holds its group. But
// the message that would close its place has no route either, so the
// place stays open (closed = unsent), and the group waits for an
// operator under skip too (the successor, unrouted as well, would only
// fail): a successor sent past an open place would reach a GapWait
// consumer before anything of that place could.
func TestOrdered_AnUnroutedDeadHeadUnderSkipHoldsItsGroupForItsOpenPlaceNotForAnUnsureWait(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	head, next := keys[0], keys[1]
	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 1
	// The dispatcher lost the ordered route's route (a deploy without it).
	router, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"orders": h.routes["orders"]}, 0)
	require.NoError(t, err)
	e := h.engine(t, policy, router)

	for range 3 { // the clock stands still: far inside UnsureWait
		_, err := e.Sweep(context.Background())
		require.NoError(t, err)
	}
	got := h.row(t, head)
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.True(t, got.UnsureAt.IsZero(), "no unsure send: nothing to wait out")
	require.Equal(t, outbox.ClosedUnsent, got.Closed, "its closing message had no route either")
	require.Zero(t, h.row(t, next).Attempt, "the successor waits for the operator, not for UnsureWait")
}
