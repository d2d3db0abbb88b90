package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// claimingStore is recordingStore with a Claim that either fails with
// claimErr or succeeds, returning the row as a claim of a lean row reads
// it back (claimed, attempt 1, no shard: Unindexed).
type claimingStore struct {
	*recordingStore
	claimErr error
}

func (s *claimingStore) Claim(_ context.Context, key string, now time.Time, lease time.Duration, _ int) (outbox.Row, error) {
	s.mu.Lock()
	s.claims = append(s.claims, key)
	s.mu.Unlock()
	if s.claimErr != nil {
		return outbox.Row{}, s.claimErr
	}
	created := now.Add(-time.Minute)
	return outbox.Row{Key: key, Queue: "orders", Payload: []byte(`{}`), Status: outbox.StatusClaimed, Attempt: 1,
		Token: "tok", LeaseUntil: now.Add(lease), CreatedAt: created, DueAt: created, StageID: "s1", Unindexed: true}, nil
}

// TestReviewLean_TheWakeHandsOverEveryLeanRowItLeavesUnsettled: the
// architecture promises "each way the wake leaves a lean row unsettled
// is one write that puts it in the due index". Each case below leaves a
// lean row (no shard) pending or claimed with no write at all, so only
// the backstop's next pass over the whole table finds it (and none does
// once lean has been off for longer than OUTFLOW_BACKSTOP_DRAIN).
func TestReviewLean_TheWakeHandsOverEveryLeanRowItLeavesUnsettled(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	old := now.Add(-time.Minute) // the wake lags past the grace: it claims
	cases := []struct {
		name     string
		refs     []outbox.DueRef
		claimErr error
		doneErr  error
		deadline bool
		budget   int
		// wantIndexed is how many hand-over writes the wake owes.
		wantIndexed int
	}{
		{name: "an old lean row left unsent at the deadline margin", refs: []outbox.DueRef{leanRef("k", old)}, deadline: true, wantIndexed: 1},
		{name: "an old lean row whose claim was throttled", refs: []outbox.DueRef{leanRef("k", old)},
			claimErr: &outbox.ThrottledError{Err: errors.New("ProvisionedThroughputExceededException")}, wantIndexed: 1},
		{name: "an old lean row whose claim failed outright", refs: []outbox.DueRef{leanRef("k", old)},
			claimErr: errors.New("connection reset"), wantIndexed: 1},
		{name: "a claimed lean row whose done failed outright", refs: []outbox.DueRef{leanRef("k", old)},
			doneErr: errors.New("connection reset"), wantIndexed: 1},
		{name: "a fresh lean row past the wake's row budget", refs: []outbox.DueRef{leanRef("a", now), leanRef("b", now)},
			budget: 1, wantIndexed: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := testPolicy()
			p.WakeGrace = 15 * time.Second
			if tc.budget > 0 {
				p.RowBudget = tc.budget
			}
			store := &claimingStore{recordingStore: newRecordingStore(), claimErr: tc.claimErr}
			store.doneErr = tc.doneErr
			e, err := outbox.New(store, &sink{}, p, outbox.WithClock(func() time.Time { return now }))
			require.NoError(t, err)
			ctx := context.Background()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(p.DeadlineMargin))
				defer cancel()
			}
			res, _ := e.DeliverRefs(ctx, tc.refs)
			require.Len(t, store.settles["index"], tc.wantIndexed,
				"a lean row the wake left unsettled must be put in the due index (claims %v, settles %v, result %+v)",
				store.claims, store.settles, res)
		})
	}
}
