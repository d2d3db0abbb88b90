package outbox_test

// Adversarial review of "purge closes the place" (TestRev_*).

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// sentPlaces lists what SQS accepted for group g, in order: key, and
// "/closed" for a marker.
func sentPlaces(log *sendLog, g string) []string {
	log.mu.Lock()
	defer log.mu.Unlock()
	var out []string
	for _, r := range log.order {
		if r.Group != g {
			continue
		}
		s := r.Key
		if r.Closed != "" {
			s += "/closed"
		}
		out = append(out, s)
	}
	return out
}

// stageBadKeyGroup stages, as a producer in another language might, a
// group of three whose middle key is no FIFO deduplication id (a space):
// the dispatcher refuses it for good.
func stageBadKeyGroup(t *testing.T, h *harness) []string {
	t.Helper()
	keys := []string{"g-01", "g 02 bad", "g-03"}
	for _, k := range keys {
		require.NoError(t, h.store.StageOrdered(context.Background(), outbox.Row{Key: k, Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)}, h.clock.Now()))
	}
	return keys
}

// A row refused for good because its key cannot be the FIFO
// deduplication id. The review found its purge sent a closing message
// with the same key as its deduplication id, refused for the same reason,
// so the group never moved however often it was purged. The closing
// message now has a deduplication id of its own (the key's hash): the
// place closes at the first purge, and the successor follows.
func TestRev_APurgedRowWhoseKeyIsNoDedupIDStillHasItsPlaceClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	keys := stageBadKeyGroup(t, h)
	log := &sendLog{next: h.sqs}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	for range 2 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, outbox.StatusFailed, h.row(t, keys[1]).Status)

	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	require.NoError(t, op.Purge(ctx, keys[1], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))
	for range 2 {
		h.clock.Advance(time.Minute)
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, []string{keys[0], keys[1] + "/closed", keys[2]}, sentPlaces(log, "g"))
}

// A closing message that can never be sent (refused for good) must not
// hold its group for ever: the purge's closing message is dead-lettered
// as closed "purge-unsent", which holds the group, and a second purge
// deletes it, as before places were closed, so the group goes on (with
// its place open: the operator gave it up).
func TestPurge_AClosingMessageThatCannotBeSentLeavesTheNextPurgeToDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		if r.Key == keys[1] {
			return outbox.Permanent(errors.New("injected: refused for good, closing message too"))
		}
		return nil
	}}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	sweeps := func() {
		t.Helper()
		for range 2 {
			h.clock.Advance(time.Minute)
			_, err := e.Sweep(ctx)
			require.NoError(t, err)
		}
	}
	sweeps()
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)

	// Phase 1: the first purge tries to close the place; the closing
	// message is refused, and the row is a dead letter again, unsent.
	require.NoError(t, op.Purge(ctx, keys[1], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))
	sweeps()
	dead := h.row(t, keys[1])
	require.Equal(t, outbox.StatusFailed, dead.Status)
	require.Equal(t, outbox.ClosedPurgeUnsent, dead.Closed)
	require.Equal(t, []string{keys[0]}, sentPlaces(log, "g"), "the group still waits")

	// Phase 2: the second purge deletes it, and the group goes on.
	require.NoError(t, op.Purge(ctx, keys[1], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))
	h.gone(t, keys[1])
	sweeps()
	require.Equal(t, []string{keys[0], keys[2]}, sentPlaces(log, "g"))
}

// A dead letter whose prev is malformed but whose seq is sound holds a
// place its successors count from (they carry seq+1). Its purge deletes
// it (operator.go: "no place a consumer counts to close"), and its
// successor goes with no marker in its place.
//
// Premise changed (the review expected a closing message): a closing
// message must go after the row's predecessor, and a malformed prev hides
// which row that is (the row was dead-lettered at its claim, whatever its
// predecessor's state), so a message sent in its place could pass it. The
// place is left open, as docs/consuming.md says: a GapPass consumer
// passes it, a GapWait consumer waits at it. Only a producer that writes
// prev with the wrong type (never Outflow's) gets there.
func TestRev_APurgedRowWithAMalformedPrevLeavesItsPlaceUnclosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	k := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
	h.setRaw(t, k[1], dynamo.AttrPrev, &types.AttributeValueMemberN{Value: "1"})
	log := &sendLog{next: h.sqs}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	for range 2 {
		h.clock.Advance(time.Minute)
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	require.NoError(t, op.Purge(ctx, k[1], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))
	for range 2 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, []string{k[0], k[2]}, sentPlaces(log, "g"),
		"the purge deletes a row whose predecessor is unknown; no message goes in its place")
	h.gone(t, k[1])
}

// Held: a dead letter refused for its attributes (too many) still has its
// place closed; the marker carries none of them.
func TestRev_AMarkerGoesForARowRefusedForItsAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	attrs := map[string]string{}
	for i := range 12 {
		attrs[fmt.Sprintf("a%02d", i)] = "v"
	}
	keys := []string{"h-01", "h-02", "h-03"}
	for i, key := range keys {
		row := outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)}
		if i == 1 {
			row.Attributes = attrs
		}
		require.NoError(t, h.store.StageOrdered(ctx, row, h.clock.Now()))
	}
	log := &sendLog{next: h.sqs}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	for range 2 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, outbox.StatusFailed, h.row(t, keys[1]).Status)
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	require.NoError(t, op.Purge(ctx, keys[1], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))
	// Purged again while its marker waits: refused, the marker stays.
	var c *outbox.ConflictError
	require.ErrorAs(t, op.Purge(ctx, keys[1], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}), &c)
	for range 2 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, []string{keys[0], keys[1] + "/closed", keys[2]}, sentPlaces(log, "g"))
}

// Held: on the wake's path, a purged head's successor never goes before
// the head's marker: named alone it is left to the sweep; named with the
// head it follows the marker.
func TestRev_TheWakeSendsNoSuccessorBeforeThePurgedHeadsMarker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	k := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		if r.Key == k[0] && r.Closed == "" {
			return outbox.Permanent(errTransient)
		}
		return nil
	}}
	p := orderedPolicy(outbox.DeadHeadBlock)
	e := h.engine(t, p, log)
	_, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, h.row(t, k[0]).Status)
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	require.NoError(t, op.Purge(ctx, k[0], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))

	_, err = e.DeliverRefs(ctx, []outbox.DueRef{{Key: k[1]}, {Key: k[2]}})
	require.NoError(t, err)
	require.Empty(t, sentPlaces(log, "g"), "the successors wait for the head's marker")
	_, err = e.DeliverRefs(ctx, []outbox.DueRef{{Key: k[2]}, {Key: k[1]}, {Key: k[0]}})
	require.NoError(t, err)
	_, err = e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{k[0] + "/closed", k[1], k[2]}, sentPlaces(log, "g"))
}
