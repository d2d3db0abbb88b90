package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// linkingStore is recordingStore whose Link answers from links.
type linkingStore struct {
	*recordingStore
	links map[string]outbox.Link
}

func (s *linkingStore) Link(_ context.Context, key string) (outbox.Link, error) {
	return s.links[key], nil
}

// TestReviewLean2_TheWakeHandsOverAnUnindexedRowItsHeadCheckLeaves: a row
// of an ordered group staged with no shard (by another language's
// producer: the case shardIfMissing's comment names, "which only the wake
// (by its stream record) ever claims") whose predecessor is claimed
// elsewhere is left by the wake's head check (gateWait) with no write:
// leaveUnsent is called on claim conflicts, claim errors, the budget and
// the deadline, but not on gateWait, gateBlocked, gateError, nor for a
// row still parked when the run ends. No sweep ever sees it; on a table
// that never ran lean no backstop runs either, so once its predecessor
// settles the group stops there for ever.
func TestReviewLean2_TheWakeHandsOverAnUnindexedRowItsHeadCheckLeaves(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	p := testPolicy()
	p.WakeGrace = 15 * time.Second
	p.HeadWait = 0
	p.Ordered = map[string]outbox.DeadHead{"ordered.fifo": outbox.DeadHeadSkip}
	store := &linkingStore{recordingStore: newRecordingStore(), links: map[string]outbox.Link{
		"head": {Found: true, Status: outbox.StatusClaimed, Attempt: 1, Queue: "ordered.fifo", Seq: 1, DueAt: now},
	}}
	e, err := outbox.New(store, &sink{}, p, outbox.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	img := outbox.Row{Key: "second", Queue: "ordered.fifo", Group: "g", Seq: 2, Prev: "head", Payload: []byte(`{}`),
		Status: outbox.StatusPending, CreatedAt: now, DueAt: now, StageID: "s2", Unindexed: true}
	ref := outbox.DueRef{Key: "second", Queue: "ordered.fifo", Prev: "head", Seq: 2, Linked: true, Image: &img}
	res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{ref})
	require.NoError(t, err)
	require.Empty(t, store.claims, "its head is in flight: not claimed")
	require.Len(t, store.settles["index"], 1,
		"an unindexed row the wake leaves to the sweep must be put in the due index (settles %v, result %+v)", store.settles, res)
}

// releaseFailingStore is claimingStore whose Release fails outright.
type releaseFailingStore struct {
	*claimingStore
}

func (s *releaseFailingStore) Release(_ context.Context, row outbox.Row) error {
	_ = s.record("release", row)
	return errors.New("connection reset")
}

// leaseEnding is a deliverer that leaves every row unsent for its lease.
type leaseEnding struct{}

func (leaseEnding) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	for i := range errs {
		errs[i] = outbox.ErrLeaseEnding
	}
	return errs
}

// TestReviewLean2_AClaimedLeanRowWhoseReleaseFailedIsHandedOver: the
// architecture says "each way the wake leaves a lean row unsettled is
// one write that puts it in the due index", and 73f91a5 hands over a
// claimed row whose done, retry or dead-lettering failed outright
// (settleFailed). A release that fails outright (the deliverer left the
// row unsent for its lease, or the deadline came) is not handed over: the
// row stays claimed with no shard, and once its lease lapses only the
// backstop's next pass finds it (and counts it as a row the stream
// missed, firing MissedRowsAlarm, though the stream missed nothing).
func TestReviewLean2_AClaimedLeanRowWhoseReleaseFailedIsHandedOver(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	p := testPolicy()
	p.WakeGrace = 15 * time.Second
	store := &releaseFailingStore{&claimingStore{recordingStore: newRecordingStore()}}
	e, err := outbox.New(store, leaseEnding{}, p, outbox.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	res, _ := e.DeliverRefs(context.Background(), []outbox.DueRef{leanRef("k", now.Add(-time.Minute))})
	require.Len(t, store.settles["release"], 1, "claimed (older than the grace), left unsent, released: %+v", res)
	require.Len(t, store.settles["index"], 1,
		"a claimed lean row whose release failed must be put in the due index (settles %v, result %+v)", store.settles, res)
}
