package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// recordingStore is a fake store for the wake's choice of path: every
// claim is refused as held elsewhere (so a claimed row is never sent),
// and every settle is recorded.
type recordingStore struct {
	outbox.Store
	mu      sync.Mutex
	claims  []string
	settles map[string][]outbox.Row // by op
	// doneErr is what every done returns, once recorded.
	doneErr error
}

func newRecordingStore() *recordingStore {
	return &recordingStore{settles: map[string][]outbox.Row{}}
}

func (s *recordingStore) Shards() int { return 1 }

func (s *recordingStore) Claim(_ context.Context, key string, _ time.Time, _ time.Duration, _ int) (outbox.Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = append(s.claims, key)
	return outbox.Row{}, &outbox.ConflictError{Key: key, Op: "claim"}
}

func (s *recordingStore) record(op string, row outbox.Row) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settles[op] = append(s.settles[op], row)
	return nil
}

func (s *recordingStore) Done(_ context.Context, row outbox.Row, _ time.Time) error {
	if err := s.record("done", row); err != nil || s.doneErr == nil {
		return err
	}
	return s.doneErr
}

func (s *recordingStore) Index(_ context.Context, row outbox.Row) error {
	return s.record("index", row)
}

func (s *recordingStore) Retry(_ context.Context, row outbox.Row, _ time.Time, _ []outbox.AttemptError) error {
	return s.record("retry", row)
}

func (s *recordingStore) DeadLetter(_ context.Context, row outbox.Row, _ time.Time, _ []outbox.AttemptError) error {
	return s.record("dead-letter", row)
}

func (s *recordingStore) Link(_ context.Context, key string) (outbox.Link, error) {
	return outbox.Link{}, nil
}

// sink is a fake deliverer that answers every row with err and records
// what it was given.
type sink struct {
	mu   sync.Mutex
	err  error
	sent []outbox.Row
}

func (s *sink) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, rows...)
	errs := make([]error, len(rows))
	for i := range errs {
		errs[i] = s.err
	}
	return errs
}

// wakeRef is a wake ref of a fresh unordered row staged at created, with
// its stream image.
func wakeRef(key string, created time.Time) outbox.DueRef {
	img := outbox.Row{Key: key, Queue: "orders", Payload: []byte(`{}`), Status: outbox.StatusPending, CreatedAt: created, DueAt: created, StageID: "s1"}
	return outbox.DueRef{Key: key, Queue: "orders", Linked: true, Image: &img}
}

func TestDeliverRefs_SendsOnlyFreshUnorderedImagesWithoutAClaim(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	policy := testPolicy()
	policy.WakeGrace = 15 * time.Second
	policy.Ordered = map[string]outbox.DeadHead{"ordered.fifo": outbox.DeadHeadSkip}
	cases := []struct {
		name      string
		edit      func(*outbox.DueRef)
		grace     time.Duration
		unclaimed bool
	}{
		{"a fresh unordered row", func(*outbox.DueRef) {}, 0, true},
		{"one just inside the grace", func(r *outbox.DueRef) {
			r.Image.CreatedAt, r.Image.DueAt = now.Add(-15*time.Second+time.Millisecond), now.Add(-15*time.Second+time.Millisecond)
		}, 0, true},
		{"no image", func(r *outbox.DueRef) { r.Image = nil }, 0, false},
		{"the wake grace is off", func(*outbox.DueRef) {}, -1, false},
		{"as old as the grace: the sweep may claim it", func(r *outbox.DueRef) {
			r.Image.CreatedAt, r.Image.DueAt = now.Add(-15*time.Second), now.Add(-15*time.Second)
		}, 0, false},
		{"created in the future", func(r *outbox.DueRef) { r.Image.CreatedAt, r.Image.DueAt = now.Add(time.Second), now.Add(time.Second) }, 0, false},
		{"delayed when staged", func(r *outbox.DueRef) { r.Image.DueAt = r.Image.CreatedAt.Add(time.Millisecond) }, 0, false},
		{"on an ordered route", func(r *outbox.DueRef) { r.Queue, r.Image.Queue = "ordered.fifo", "ordered.fifo" }, 0, false},
		{"on an ordered route by its image alone", func(r *outbox.DueRef) { r.Queue, r.Image.Queue = "", "ordered.fifo" }, 0, false},
		{"with a predecessor", func(r *outbox.DueRef) { r.Image.Prev = "before" }, 0, false},
		{"with a predecessor in the ref", func(r *outbox.DueRef) { r.Prev = "before" }, 0, false},
		{"with a place in a group", func(r *outbox.DueRef) { r.Image.Seq = 1 }, 0, false},
		{"tried before", func(r *outbox.DueRef) { r.Image.Attempt = 1 }, 0, false},
		{"claimed", func(r *outbox.DueRef) { r.Image.Status, r.Image.Token = outbox.StatusClaimed, "t" }, 0, false},
		{"malformed", func(r *outbox.DueRef) { r.Image.Malformed = "bad" }, 0, false},
		{"staged without a stage id (a producer that does not write one)", func(r *outbox.DueRef) { r.Image.StageID = "" }, 0, false},
		{"the image of another key", func(r *outbox.DueRef) { r.Image.Key = "other" }, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := policy
			if tc.grace < 0 {
				p.WakeGrace = 0
			}
			store, d := newRecordingStore(), &sink{}
			e, err := outbox.New(store, d, p, outbox.WithClock(func() time.Time { return now }))
			require.NoError(t, err)
			ref := wakeRef("k", now.Add(-time.Second))
			tc.edit(&ref)
			res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{ref})
			require.NoError(t, err)
			if !tc.unclaimed {
				require.Equal(t, []string{"k"}, store.claims, "the row takes the claim path")
				require.Empty(t, d.sent)
				require.Zero(t, res.Unclaimed)
				return
			}
			require.Empty(t, store.claims, "no claim write")
			require.Len(t, d.sent, 1)
			require.True(t, d.sent[0].Unclaimed)
			require.Equal(t, 1, d.sent[0].Attempt, "sent as attempt 1")
			require.Equal(t, 1, res.Unclaimed)
			require.Equal(t, 1, res.Delivered)
			require.Len(t, store.settles["done"], 1)
			require.True(t, store.settles["done"][0].Unclaimed, "the settle carries the mark its condition is chosen by")
			require.Equal(t, ref.Image.CreatedAt, store.settles["done"][0].CreatedAt)
		})
	}
}

func TestDeliverRefs_RecordsTheAttemptOfAFailedUnclaimedSend(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	cases := []struct {
		name        string
		err         error
		maxAttempts int
		op          string
	}{
		{"a transient failure is retried", errors.New("throttled"), 3, "retry"},
		{"a permanent failure is dead-lettered", outbox.Permanent(errors.New("invalid")), 3, "dead-letter"},
		{"a budget of one is spent", errors.New("throttled"), 1, "dead-letter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := testPolicy()
			p.WakeGrace, p.MaxAttempts = 15*time.Second, tc.maxAttempts
			store := newRecordingStore()
			e, err := outbox.New(store, &sink{err: tc.err}, p, outbox.WithClock(func() time.Time { return now }))
			require.NoError(t, err)
			_, err = e.DeliverRefs(context.Background(), []outbox.DueRef{wakeRef("k", now)})
			require.NoError(t, err)
			require.Len(t, store.settles, 1)
			require.Len(t, store.settles[tc.op], 1)
			got := store.settles[tc.op][0]
			require.True(t, got.Unclaimed)
			require.Equal(t, 1, got.Attempt, "the failed send counts as attempt 1")
		})
	}
}

func TestDeliverRefs_GivesBackAnUnsentUnclaimedRowWithNoWrite(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	p := testPolicy()
	p.WakeGrace = 15 * time.Second
	store := newRecordingStore()
	e, err := outbox.New(store, &sink{err: outbox.ErrLeaseEnding}, p, outbox.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{wakeRef("k", now)})
	require.NoError(t, err)
	require.Equal(t, 1, res.Unclaimed)
	require.Empty(t, store.settles, "no release write: the row was never claimed, and the sweep takes it after the grace")
}

func TestDeliverRefs_LeavesAnUnclaimedRowPastTheDeadlineToTheSweepWithNoWrite(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	p := testPolicy()
	p.WakeGrace = 15 * time.Second
	store, d := newRecordingStore(), &sink{}
	e, err := outbox.New(store, d, p, outbox.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	// The deadline margin is already reached: nothing may be sent.
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(p.DeadlineMargin))
	defer cancel()
	_, _ = e.DeliverRefs(ctx, []outbox.DueRef{wakeRef("k", now)})
	require.Empty(t, d.sent)
	require.Empty(t, store.settles, "no write: the row was never claimed")
	require.Empty(t, store.claims)
}

// throttlingStore throttles the first refuse done writes, and records
// when each was tried.
type throttlingStore struct {
	*recordingStore
	refuse int
	tries  []time.Time
}

func (s *throttlingStore) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	s.mu.Lock()
	s.tries = append(s.tries, time.Now())
	refused := len(s.tries) <= s.refuse
	s.mu.Unlock()
	if refused {
		return outbox.Throttled(errors.New("done: ProvisionedThroughputExceededException"))
	}
	return s.recordingStore.Done(ctx, row, now)
}

// TestDeliverRefs_RetriesAThrottledUnclaimedSettleWithinTheGrace
// throttles the one write of an unclaimed send: the wake tries it again
// with backoff while the row is younger than the wake grace (a sweep
// may claim it after that, and send it again), and no later.
func TestDeliverRefs_RetriesAThrottledUnclaimedSettleWithinTheGrace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		refuse  int
		applied bool
	}{
		{"a settle throttled twice applies on the third try", 2, true},
		{"a settle throttled throughout is given up before the grace ends", 1 << 30, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				p := testPolicy()
				p.WakeGrace = 15 * time.Second
				store := &throttlingStore{recordingStore: newRecordingStore(), refuse: tc.refuse}
				d := &sink{}
				e, err := outbox.New(store, d, p)
				require.NoError(t, err)
				created := time.Now().Add(-time.Second)
				res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{wakeRef("k", created)})
				require.NoError(t, err)
				require.Len(t, d.sent, 1, "sent once")
				require.Empty(t, store.claims)
				for _, at := range store.tries {
					require.Less(t, at.Sub(created), p.WakeGrace, "no try once a sweep may claim the row")
				}
				if tc.applied {
					require.Len(t, store.tries, 3)
					require.Len(t, store.settles["done"], 1)
					require.Equal(t, 1, res.Delivered)
					require.Equal(t, 2, res.Throttled)
					require.Zero(t, res.Errors)
					return
				}
				require.Greater(t, len(store.tries), 3, "tried again while the grace lasted")
				require.Empty(t, store.settles["done"])
				require.Equal(t, 1, res.Errors, "left to the sweep")
				require.Equal(t, len(store.tries), res.Throttled)
			})
		})
	}
}
