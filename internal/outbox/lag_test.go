package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// staleIndex is a due index that lags without end: besides the store's own
// entries it returns every entry it ever returned (remember) or was given
// (stale), as a global secondary index does until a write reaches it. It
// counts the claims that reach the store.
type staleIndex struct {
	outbox.Store
	remember bool
	mu       sync.Mutex
	stale    map[string]outbox.DueRef
	claims   atomic.Int64
}

func newStaleIndex(s outbox.Store, remember bool, stale ...outbox.DueRef) *staleIndex {
	x := &staleIndex{Store: s, remember: remember, stale: map[string]outbox.DueRef{}}
	for _, ref := range stale {
		x.stale[ref.Key] = ref
	}
	return x
}

func (x *staleIndex) QueryDue(ctx context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	refs, more, err := x.Store.QueryDue(ctx, shard, now, after, limit)
	if err != nil || more || after != nil {
		return refs, more, err // the tests' backlogs fit in one page
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	fresh := map[string]bool{}
	for _, ref := range refs {
		fresh[ref.Key] = true
		if x.remember {
			ref.Cursor = nil
			x.stale[ref.Key] = ref
		}
	}
	for key, ref := range x.stale {
		if !fresh[key] && ref.Shard == shard {
			refs = append(refs, ref)
		}
	}
	return refs, false, nil
}

func (x *staleIndex) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	x.claims.Add(1)
	return x.Store.Claim(ctx, key, now, lease, maxAttempts)
}

// A sweep runs another pass whenever it claimed something, and a lagging
// index still returns the rows the first pass settled: claiming them again
// costs a refused conditional write each, billed as a write, for nothing.
func TestSweep_NeverClaimsAgainWhatItSettledWhenTheIndexLags(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	ctx := context.Background()
	h.stage(t, rowsFor("orders", 10, "")...)
	// One row fails its first attempt: retried, due again in a second,
	// which the sweep's next pass must not claim early either.
	retried := "orders-3"
	fail := faults.Refuse{Next: h.sqs, Fail: func(r outbox.Row) error {
		if r.Key == retried && r.Attempt == 1 {
			return errTransient
		}
		return nil
	}}
	idx := newStaleIndex(h.store, true)
	e, err := outbox.New(idx, fail, testPolicy(), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)

	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 9, res.Delivered)
	require.Equal(t, 1, res.Retried)
	require.Zero(t, res.Conflicts, "no refused claims: the run knows what it settled")
	require.EqualValues(t, 10, idx.claims.Load(), "one claim per row")
}

// An index entry that is stale when the row has moved on (delivered or
// dead-lettered by another worker, or retried to a later due time) costs
// one refused claim in a run, not one in every pass.
func TestSweep_AStaleEntryCostsOneRefusedClaimPerRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		moved func(t *testing.T, h *harness, key string)
	}{
		{"delivered elsewhere", func(t *testing.T, h *harness, key string) {
			_, err := h.engine(t, testPolicy(), nil).DeliverKeys(context.Background(), []string{key})
			require.NoError(t, err)
			h.gone(t, key)
		}},
		{"dead-lettered elsewhere", func(t *testing.T, h *harness, key string) {
			d := faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return outbox.Permanent(errTransient) }}
			_, err := h.engine(t, testPolicy(), d).DeliverKeys(context.Background(), []string{key})
			require.NoError(t, err)
			require.Equal(t, outbox.StatusFailed, h.row(t, key).Status)
		}},
		{"due again later", func(t *testing.T, h *harness, key string) {
			d := faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return errTransient }}
			_, err := h.engine(t, testPolicy(), d).DeliverKeys(context.Background(), []string{key})
			require.NoError(t, err)
			require.True(t, h.row(t, key).DueAt.After(h.clock.Now()))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessShards(t, 1)
			ctx := context.Background()
			rows := rowsFor("orders", 3, "")
			h.stage(t, rows...)
			// The entry as the index held it before the row moved on.
			refs, _, err := h.store.QueryDue(ctx, 0, h.clock.Now(), nil, 10)
			require.NoError(t, err)
			var stale outbox.DueRef
			for _, ref := range refs {
				if ref.Key == rows[0].Key {
					stale = ref
				}
			}
			require.Equal(t, rows[0].Key, stale.Key)
			tc.moved(t, h, stale.Key)

			// The other rows make the sweep claim, so it runs a second
			// pass, which meets the stale entry again.
			idx := newStaleIndex(h.store, false, stale)
			e, err := outbox.New(idx, h.sqs, testPolicy(), outbox.WithClock(h.clock.Now))
			require.NoError(t, err)
			res, err := e.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, res.Delivered)
			require.Equal(t, 1, res.Conflicts, "the stale entry's claim is refused once")
			require.EqualValues(t, 3, idx.claims.Load())
		})
	}
}

// A stale entry names a row by key: the claim takes the row as it is now.
// A key delivered and staged again into its ordered group has a fresh row
// behind a predecessor the stale entry (the old row's, the group's head
// then) knows nothing of: the fresh row still waits for it.
func TestSweep_AStaleEntryOfAKeyStagedAgainClaimsTheFreshRowInItsOrder(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	ctx := context.Background()
	row := func(key string) outbox.Row {
		return outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(`{"k":"` + key + `"}`)}
	}
	require.NoError(t, h.store.StageOrdered(ctx, row("A"), h.clock.Now()))
	refs, _, err := h.store.QueryDue(ctx, 0, h.clock.Now(), nil, 10)
	require.NoError(t, err)
	require.Len(t, refs, 1)
	stale := refs[0] // A at place 1, head of its group
	res, err := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), nil).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)

	// B follows A; then A is staged again, behind B. B's delivery fails
	// for now, so A's fresh row must wait.
	require.NoError(t, h.store.StageOrdered(ctx, row("B"), h.clock.Now()))
	require.NoError(t, h.store.StageOrdered(ctx, row("A"), h.clock.Now()))
	require.Equal(t, "B", h.row(t, "A").Prev)
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		if r.Key == "B" {
			return errTransient
		}
		return nil
	}}
	idx := newStaleIndex(h.store, false, stale)
	e, err := outbox.New(idx, log, orderedPolicy(outbox.DeadHeadBlock), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	_, err = e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"B"}}, handed(log), "A's fresh row waits behind B, whatever its stale entry said")
	require.Equal(t, outbox.StatusPending, h.row(t, "A").Status)

	// Once B is through, A's fresh row follows.
	h.clock.Advance(time.Minute)
	log = &sendLog{next: h.sqs}
	e, err = outbox.New(idx, log, orderedPolicy(outbox.DeadHeadBlock), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	_, err = e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"B", "A"}, log.accepted()["g"])
	h.gone(t, "A")
}

// handed returns the keys of each call to the deliverer, in order.
func handed(s *sendLog) [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]string
	for _, call := range s.calls {
		var keys []string
		for _, r := range call {
			keys = append(keys, r.Key)
		}
		out = append(out, keys)
	}
	return out
}

// frontStale is a lagging due index that returns the given stale entries
// first (as a GSI sorted by due time does for an entry older than the live
// ones), then the store's own; a claim of a stale key takes slowClaim
// longer, as a round trip to DynamoDB does.
type frontStale struct {
	outbox.Store
	stale     []outbox.DueRef
	slowClaim time.Duration
	claims    atomic.Int64
}

func (x *frontStale) QueryDue(ctx context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	refs, more, err := x.Store.QueryDue(ctx, shard, now, after, limit)
	if err != nil || more || after != nil {
		return refs, more, err
	}
	fresh := map[string]bool{}
	for _, ref := range refs {
		fresh[ref.Key] = true
	}
	var out []outbox.DueRef
	for _, ref := range x.stale {
		if !fresh[ref.Key] && ref.Shard == shard {
			out = append(out, ref)
		}
	}
	return append(out, refs...), false, nil
}

func (x *frontStale) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	x.claims.Add(1)
	for _, ref := range x.stale {
		if ref.Key == key {
			time.Sleep(x.slowClaim)
		}
	}
	return x.Store.Claim(ctx, key, now, lease, maxAttempts)
}

// A successor parks behind the stale entry of its predecessor without a
// read; the refused claim shows the predecessor gone (the wake delivered
// it), so the successor is checked again and goes in the same sweep,
// rather than waiting a sweep interval for every sweep that meets the
// stale entry (found by review 13a).
func TestSweep_ARowParkedBehindAStaleEntryOfItsDeliveredPredecessorGoesInTheSameSweep(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	ctx := context.Background()
	row := func(key string) outbox.Row {
		return outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(`{"k":"` + key + `"}`)}
	}
	require.NoError(t, h.store.StageOrdered(ctx, row("A"), h.clock.Now()))
	require.NoError(t, h.store.StageOrdered(ctx, row("B"), h.clock.Now()))
	refs, _, err := h.store.QueryDue(ctx, 0, h.clock.Now(), nil, 10)
	require.NoError(t, err)
	require.Len(t, refs, 2)
	stale := refs[0]
	require.Equal(t, "A", stale.Key)
	stale.Cursor = nil

	// The wake delivers A (its batch held only A); its delete has not
	// reached the due index yet.
	_, err = h.engine(t, orderedPolicy(outbox.DeadHeadBlock), nil).DeliverKeys(ctx, []string{"A"})
	require.NoError(t, err)
	h.gone(t, "A")
	require.Equal(t, outbox.StatusPending, h.row(t, "B").Status)

	idx := &frontStale{Store: h.store, stale: []outbox.DueRef{stale}, slowClaim: 100 * time.Millisecond}
	log := &sendLog{next: h.sqs}
	e, err := outbox.New(idx, log, orderedPolicy(outbox.DeadHeadBlock), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"B"}, log.accepted()["g"],
		"A is delivered (its claim was refused: no such row), so B, due, must go in this sweep: %+v", res)
}

// A run holds the rows it settled, not their keys: a key delivered and
// staged again while the sweep runs is a new row, and goes in its next
// pass, as a new key does (found by review 13a).
func TestSweep_AKeyStagedAgainDuringTheSweepIsDeliveredByIt(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	ctx := context.Background()
	h.stage(t, rowsFor("orders", 2, "")...)
	again := outbox.Row{Key: "orders-0", Queue: "orders", Payload: []byte(`{"again":true}`)}
	other := outbox.Row{Key: "fresh-key", Queue: "orders", Payload: []byte(`{"fresh":true}`)}
	var once sync.Once
	var hookErrs goErrs // the hook runs on the engine's goroutines
	st := faultStore{Store: h.store, doneErr: func(outbox.Row) error { return nil }}
	restage := &doneHook{faultStore: st, after: func(r outbox.Row) {
		if r.Key == again.Key {
			once.Do(func() {
				// The producer stages the key again (and a new key) while
				// the sweep runs.
				h.clock.Advance(time.Millisecond)
				hookErrs.add(h.store.Stage(ctx, again, h.clock.Now()))
				hookErrs.add(h.store.Stage(ctx, other, h.clock.Now()))
			})
		}
	}}
	e, err := outbox.New(restage, h.sqs, testPolicy(), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.NoError(t, hookErrs.err(), "staging again while the sweep ran")
	h.gone(t, other.Key)
	require.Equal(t, 4, res.Delivered, "the fresh row of orders-0 is due and new, as fresh-key is: %+v", res)
	h.gone(t, again.Key)
}

// doneHook runs after once a Done succeeded.
type doneHook struct {
	faultStore
	after func(outbox.Row)
}

func (d *doneHook) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	err := d.faultStore.Done(ctx, row, now)
	if err == nil {
		d.after(row)
	}
	return err
}

// Expiring and quarantining settle a row too: the run does not claim it
// again when the lagging index returns it (found by review 13a).
func TestSweep_NeverClaimsAgainARowItExpiredOrQuarantined(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, h *harness, key string)
		check   func(t *testing.T, res outbox.Result)
	}{
		{"expired: final claim lapsed", func(t *testing.T, h *harness, key string) {
			ctx := context.Background()
			h.stage(t, outbox.Row{Key: key, Queue: "orders", Payload: []byte(`{}`)})
			for range p.MaxAttempts {
				_, err := h.store.Claim(ctx, key, h.clock.Now(), p.Lease, p.MaxAttempts)
				require.NoError(t, err)
				h.clock.Advance(p.Lease + time.Second) // a crash: the lease lapses
			}
		}, func(t *testing.T, res outbox.Result) { require.Equal(t, 1, res.Expired, "%+v", res) }},
		{"quarantined: status not a string", func(t *testing.T, h *harness, key string) {
			putRaw(t, h, key, true)
		}, func(t *testing.T, res outbox.Result) { require.Equal(t, 1, res.DeadLettered, "%+v", res) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessShards(t, 1)
			ctx := context.Background()
			key := "settled-by-the-run"
			tc.prepare(t, h, key)
			h.stage(t, rowsFor("emails", 2, "")...) // so the sweep runs a second pass
			idx := newStaleIndex(h.store, true)     // the index still shows what it showed
			e, err := outbox.New(idx, h.sqs, p, outbox.WithClock(h.clock.Now))
			require.NoError(t, err)
			res, err := e.Sweep(ctx)
			require.NoError(t, err)
			tc.check(t, res)
			require.Equal(t, 2, res.Delivered)
			require.Zero(t, res.Conflicts, "the run settled the row itself: no refused claim of it, %+v", res)
			require.EqualValues(t, 3, idx.claims.Load(), "one claim per row")
		})
	}
}
