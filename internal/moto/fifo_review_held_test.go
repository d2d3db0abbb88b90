package moto_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReviewHeld_PollerFailurePathKeepsOrder: the Poller's failure path as
// SQS takes it. A batch [a b c] of one group: a fails and is left to its
// visibility, b and c are released (ChangeMessageVisibility 0). Nothing of
// the group comes while a is hidden; once a lapses the group comes again
// from a, in order, in one batch; an in-time renewal keeps it held.
func TestReviewHeld_PollerFailurePathKeepsOrder(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "a", "b", "c")
	q.send("h", "x")

	batch := q.receive(10, 1)
	require.Equal(t, []string{"a", "b", "c", "x"}, bodies(batch), "several of one group in one batch, in order")
	require.NoError(t, q.setVisibility(batch[0], 1), "a renewed in time")
	require.NoError(t, q.setVisibility(batch[1], 0))
	require.NoError(t, q.setVisibility(batch[2], 0))
	require.NoError(t, q.delete(batch[3]))
	require.Empty(t, bodies(q.receive(10, 30)), "a in flight holds b and c though they are visible")

	again := q.receiveAfter(1500*time.Millisecond, 10, 30)
	require.Equal(t, []string{"a", "b", "c"}, bodies(again), "from the head once it lapsed")
}

// TestReviewHeld_ReleasedHeadWaitsForItsInFlightSuccessor: the head
// released while its successor is in flight does not go (the successor
// holds the group), and once the successor lapses the head goes first.
func TestReviewHeld_ReleasedHeadWaitsForItsInFlightSuccessor(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "a", "b")
	batch := q.receive(10, 1)
	require.Equal(t, []string{"a", "b"}, bodies(batch))
	require.NoError(t, q.setVisibility(batch[0], 0))
	require.Empty(t, bodies(q.receive(10, 30)))
	// SQS may return a alone or a and b; moto returns a alone (a pass
	// that meets a lapsed message of a group it delivered earlier in the
	// same pass counts that group in flight): fewer, never out of order.
	requirePrefix(t, []string{"a", "b"}, bodies(q.receiveAfter(1500*time.Millisecond, 10, 30)))
}

// requirePrefix requires got to be a non-empty prefix of want.
func requirePrefix(t *testing.T, want, got []string) {
	t.Helper()
	require.NotEmpty(t, got)
	require.LessOrEqual(t, len(got), len(want))
	require.Equal(t, want[:len(got)], got, "a group's messages from its head, in order")
}

// TestReviewHeld_DeduplicatesWhileTheFirstCopyIsQueuedOrInFlight: a resend
// with the same deduplication id is dropped while the first copy is in the
// queue, visible or in flight.
func TestReviewHeld_DeduplicatesWhileTheFirstCopyIsQueuedOrInFlight(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "a")
	q.send("g", "a")
	got := q.receive(10, 1)
	require.Equal(t, []string{"a"}, bodies(got))
	q.send("g", "a")
	require.Equal(t, []string{"a"}, bodies(q.receiveAfter(1500*time.Millisecond, 10, 30)))
}

// TestReviewHeld_ALapsedGroupComesBackFromItsHeadPastOtherGroups: two
// groups lapse together; each comes back from its head.
func TestReviewHeld_ALapsedGroupComesBackFromItsHeadPastOtherGroups(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "g0", "g1")
	q.send("h", "h0", "h1")
	require.Equal(t, []string{"g0", "g1", "h0", "h1"}, bodies(q.receive(10, 1)))
	require.Equal(t, []string{"g0"}, bodies(q.receiveAfter(1500*time.Millisecond, 1, 30)))
	requirePrefix(t, []string{"h0", "h1"}, bodies(q.receive(10, 30))) // g held by g0; h from its head
}
