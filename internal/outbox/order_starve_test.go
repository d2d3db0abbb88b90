package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// TestOrdered_ABlockedGroupsBacklogDoesNotStopEverySweepBeforeNewerRows: a
// group blocked by a dead head must cost each sweep a few reads, not one
// or two per row waiting behind it: the due index is oldest first and the
// blocked rows are the oldest, so a sweep that read each of them would, as
// the backlog grew (at 5 ms a read and Concurrency 16, some 100,000 rows),
// spend every invocation on them before any newer row, on any route. The
// due index projects each row's prev and seq, so a row behind one the run
// holds parks without a read.
func TestOrdered_ABlockedGroupsBacklogDoesNotStopEverySweepBeforeNewerRows(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	ddb := h.store
	ctx := context.Background()
	// Staged in the past, the group's rows a second before u: u is newer
	// than all of them without waiting for the clock to move.
	base := time.Now().Add(-time.Minute)
	for i := range 81 {
		key := "g-" + strconv.Itoa(100+i)
		require.NoError(t, ddb.StageOrdered(ctx, outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(key)}, base))
	}
	head, err := ddb.Claim(ctx, "g-100", base, time.Minute, 3)
	require.NoError(t, err)
	require.NoError(t, ddb.DeadLetter(ctx, head, base, nil))
	require.NoError(t, ddb.Stage(ctx, outbox.Row{Key: "u", Queue: "orders", Payload: []byte("u")}, base.Add(time.Second)))

	policy := orderedPolicy(outbox.DeadHeadBlock)
	policy.Concurrency = 2
	policy.DeadlineMargin = 500 * time.Millisecond
	store := &readCounter{Store: ddb}
	e, err := outbox.New(store, h.sqs, policy)
	require.NoError(t, err)

	for sweep := range 3 {
		before := store.links.Load()
		res, err := e.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.BlockedGroups)
		require.Equal(t, 80, res.Waiting)
		// The dead head, read for its successor, and at most one row per
		// page of the due index, read for the first row of the next page
		// (the run let the group's rows go when it found it blocked): not
		// one per row.
		pages := (80 + policy.PageSize - 1) / policy.PageSize
		require.LessOrEqual(t, store.links.Load()-before, int64(1+pages), "sweep %d read the blocked group's rows one by one", sweep)
		if sweep == 0 {
			got, err := ddb.Get(ctx, "u")
			require.NoError(t, err)
			require.Nil(t, got, "the unordered row goes in the first sweep")
		}
	}
}
