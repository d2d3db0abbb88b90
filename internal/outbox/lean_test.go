package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// leanRef is wakeRef's row staged lean: in no due index.
func leanRef(key string, created time.Time) outbox.DueRef {
	ref := wakeRef(key, created)
	ref.Image.Unindexed = true
	return ref
}

// TestDeliverRefs_HandsALeanRowItCannotSettleToTheSweep is the wake's
// side of lean mode: a lean row no sweep can see must not be left where
// only the backstop's scan finds it, so each way the wake leaves it
// unsettled costs one write that puts it in the due index, and no other
// way does.
func TestDeliverRefs_HandsALeanRowItCannotSettleToTheSweep(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	cases := []struct {
		name     string
		sendErr  error
		doneErr  error
		deadline bool
		lean     bool
		indexed  bool
	}{
		{"sent and settled", nil, nil, false, true, false},
		{"left unsent for the deadline", nil, nil, true, true, true},
		{"left unsent by the deliverer", outbox.ErrLeaseEnding, nil, false, true, true},
		{"its done failed outright (throttled past its retries)", nil, errors.New("connection reset"), false, true, true},
		{"its done refused: another worker has it", nil, &outbox.ConflictError{Key: "k", Op: "done"}, false, true, false},
		{"an indexed row left unsent", outbox.ErrLeaseEnding, nil, false, false, false},
		{"an indexed row whose done failed", nil, errors.New("connection reset"), false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := testPolicy()
			p.WakeGrace = 15 * time.Second
			store, d := newRecordingStore(), &sink{err: tc.sendErr}
			store.doneErr = tc.doneErr
			e, err := outbox.New(store, d, p, outbox.WithClock(func() time.Time { return now }))
			require.NoError(t, err)
			ctx := context.Background()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(p.DeadlineMargin))
				defer cancel()
			}
			ref := wakeRef("k", now)
			if tc.lean {
				ref = leanRef("k", now)
			}
			res, _ := e.DeliverRefs(ctx, []outbox.DueRef{ref})
			if !tc.indexed {
				require.Empty(t, store.settles["index"])
				require.Zero(t, res.Indexed)
				return
			}
			require.Len(t, store.settles["index"], 1)
			got := store.settles["index"][0]
			require.True(t, got.Unclaimed && got.Unindexed, "the write's condition is the row as staged")
			require.Equal(t, 1, res.Indexed)
		})
	}
}
