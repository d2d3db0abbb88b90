package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// retryHookStore runs onRetry after each successful Retry.
type retryHookStore struct {
	outbox.Store
	onRetry func(outbox.Row)
}

func (s retryHookStore) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	err := s.Store.Retry(ctx, row, dueAt, history)
	if err == nil {
		s.onRetry(row)
	}
	return err
}

// TestOrdered_AnUnlistedRowHeldToWaitGoesWhenItsPredecessorIsDeliveredLaterInTheRun:
// on a route not listed in OUTFLOW_ORDERED, a row whose predecessor is not
// settled is claimed, released, and held "for ever" in the run. The code
// (headAfterClaim) promises "Not again in this run, unless its predecessor
// is delivered in it", and the commit says the same: the hold is lifted
// only when the row was parked behind its predecessor and that one was
// delivered while the row was still parked. When the predecessor is
// retried first (the parked row is dropped, the hold stays) and delivered
// in a later pass of the same sweep, the row stays held: the sweep ends
// "drained" with a row due, whose predecessor it delivered, left for the
// next sweep (up to SweepRate, 5 minutes, later).
//
// Group g on an unlisted route: A, B. A's first send fails (retry); the
// sweep's clock then passes A's backoff, so the next pass delivers A. B
// was held when it was released to wait for A, and is never tried again.
//
// Violated: invariant 2 (a held entry outlives its reason within a run; a
// row is left unclaimed when its predecessor is settled).
func TestOrdered_AnUnlistedRowHeldToWaitGoesWhenItsPredecessorIsDeliveredLaterInTheRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	k := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	var once sync.Once
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) (err error) {
		if r.Key == k[0] {
			once.Do(func() { err = errTransient })
		}
		return err
	}}
	store := retryHookStore{Store: h.store, onRetry: func(outbox.Row) {
		// The sweep runs on: by its next pass, A's backoff has passed.
		h.clock.Advance(2 * time.Minute)
	}}
	e, err := outbox.New(store, log, testPolicy(), outbox.WithClock(h.clock.Now)) // the route is not listed
	require.NoError(t, err)

	res, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Retried)
	require.Equal(t, "drained", res.Stopped)
	require.Equal(t, []string{k[0]}, log.accepted()["g"][:1], "A, retried, was delivered later in the same sweep")
	require.Equal(t, k, log.accepted()["g"], "B's predecessor was delivered in this sweep, yet B (due, pending) was left for the next sweep: result %+v", res)
}
