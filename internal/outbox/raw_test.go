package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// putRaw writes an item by hand into the due index: without a payload, or
// (foreign) with a state the store cannot read.
func putRaw(t *testing.T, h *harness, key string, foreign bool) {
	t.Helper()
	now := strconv.FormatInt(h.clock.Now().UnixMilli()-1000, 10)
	item := map[string]types.AttributeValue{
		dynamo.AttrKey:       &types.AttributeValueMemberS{Value: key},
		dynamo.AttrQueue:     &types.AttributeValueMemberS{Value: "orders"},
		dynamo.AttrShard:     &types.AttributeValueMemberS{Value: dynamo.ShardOf(key, h.store.Shards())},
		dynamo.AttrDueAt:     &types.AttributeValueMemberN{Value: now},
		dynamo.AttrCreatedAt: &types.AttributeValueMemberN{Value: now},
		dynamo.AttrStatus:    &types.AttributeValueMemberS{Value: "pending"},
		dynamo.AttrAttempt:   &types.AttributeValueMemberN{Value: "0"},
	}
	if foreign {
		item[dynamo.AttrStatus] = &types.AttributeValueMemberN{Value: "7"}
	}
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(h.store.Table()), Item: item})
	require.NoError(t, err)
}

// rawItem is a due pending row as a producer in another language writes
// it, changed by mutate.
func rawItem(h *harness, key string, mutate func(map[string]types.AttributeValue)) map[string]types.AttributeValue {
	now := strconv.FormatInt(h.clock.Now().UnixMilli()-1000, 10)
	it := map[string]types.AttributeValue{
		dynamo.AttrKey:       &types.AttributeValueMemberS{Value: key},
		dynamo.AttrQueue:     &types.AttributeValueMemberS{Value: "orders"},
		dynamo.AttrPayload:   &types.AttributeValueMemberS{Value: `{"k":"` + key + `"}`},
		dynamo.AttrShard:     &types.AttributeValueMemberS{Value: dynamo.ShardOf(key, h.store.Shards())},
		dynamo.AttrDueAt:     &types.AttributeValueMemberN{Value: now},
		dynamo.AttrCreatedAt: &types.AttributeValueMemberN{Value: now},
		dynamo.AttrStatus:    &types.AttributeValueMemberS{Value: "pending"},
		dynamo.AttrAttempt:   &types.AttributeValueMemberN{Value: "0"},
	}
	mutate(it)
	return it
}

// inDueIndex reports whether the item still carries both due-index keys.
func inDueIndex(t *testing.T, h *harness, key string) bool {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(h.store.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: key}},
	})
	require.NoError(t, err)
	_, shard := out.Item[dynamo.AttrShard]
	_, due := out.Item[dynamo.AttrDueAt]
	return len(out.Item) > 0 && shard && due
}

// sweepsDeadLetter writes each raw shape, runs ten sweeps with the clock
// moving a day between them, and requires every item to be a dead letter
// (status failed, out of the due index) whose last error says why: an
// item merely gone from the due index could as well have been deleted.
func sweepsDeadLetter(t *testing.T, shapes map[string]rawShape) {
	t.Helper()
	h := newHarness(t)
	for key, shape := range shapes {
		_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(h.store.Table()), Item: rawItem(h, key, shape.mutate)})
		require.NoError(t, err, key)
	}
	var last outbox.Result
	for range 10 {
		res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
		require.NoError(t, err)
		last = res
		h.clock.Advance(24 * time.Hour)
	}
	for key, shape := range shapes {
		require.False(t, inDueIndex(t, h, key), "%s still in the due index after 10 sweeps over 10 days; last sweep %+v", key, last)
		item := rawGet(t, h, key)
		require.NotEmpty(t, item, "%s was deleted, not dead-lettered", key)
		require.Equal(t, &types.AttributeValueMemberS{Value: "failed"}, item[dynamo.AttrStatus], key)
		lastErr, _ := item[dynamo.AttrLastError].(*types.AttributeValueMemberS)
		require.NotNil(t, lastErr, "%s has no last_error: %v", key, item)
		require.Contains(t, lastErr.Value, shape.reason, key)
	}
}

// rawShape is a change to a raw row and the reason its dead letter gives.
type rawShape struct {
	mutate func(map[string]types.AttributeValue)
	reason string
}

// rawGet reads an item as stored (nil if there is none).
func rawGet(t *testing.T, h *harness, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(h.store.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: key}},
	})
	require.NoError(t, err)
	return out.Item
}

// A producer that writes created_at in microseconds (a valid whole
// number, so Decode accepts it) makes the row look created in the future.
// Left to the wake until created_at plus the grace, it would wait 50,000
// years; the wake only ever sees the insert, so once that attempt is gone
// (wake off, failed, or a retry) only the sweep can deliver it.
func TestSweep_TakesARowWhoseCreatedAtIsInTheFuture(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(h.store.Table()), Item: rawItem(h, "micros", func(it map[string]types.AttributeValue) {
			it[dynamo.AttrCreatedAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(h.clock.Now().UnixMicro(), 10)}
		})})
	require.NoError(t, err)
	p := testPolicy()
	p.WakeGrace = 15 * time.Second
	var last outbox.Result
	for range 10 {
		last, err = h.engine(t, p, nil).Sweep(context.Background())
		require.NoError(t, err)
		h.clock.Advance(24 * time.Hour)
	}
	require.False(t, inDueIndex(t, h, "micros"), "still due after 10 sweeps over 10 days; last sweep %+v", last)
	h.gone(t, "micros") // delivered, not dead-lettered
}

// A claimed row whose lease ends far past any lease Outflow takes would
// conflict on every sweep until then; it is quarantined as malformed.
func TestSweep_QuarantinesAClaimedRowWithAFarFutureLease(t *testing.T) {
	t.Parallel()
	sweepsDeadLetter(t, map[string]rawShape{
		// lease_until written in microseconds: about year 58,000.
		"lease-micros": {func(it map[string]types.AttributeValue) {
			it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "claimed"}
			it[dynamo.AttrLeaseUntil] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMicro(), 10)}
		}, "malformed: malformed item: claimed with lease_until more than"},
		"lease-huge": {func(it map[string]types.AttributeValue) {
			it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "claimed"}
			it[dynamo.AttrLeaseUntil] = &types.AttributeValueMemberN{Value: "1e30"}
		}, "malformed: malformed item: claimed with lease_until more than"},
	})
}

// attempt = 1E-130 is a number DynamoDB stores (its smallest positive
// one). The claim's attempt + 1 needs 131 significant digits: DynamoDB
// refuses that update (38 at most), and so does moto under server.py. It is
// neither a conflict nor a size error; the row is dead-lettered with the
// refusal rather than retried as a plain error on every sweep, for ever.
func TestSweep_DeadLettersARowWhoseClaimTheStoreRefuses(t *testing.T) {
	t.Parallel()
	sweepsDeadLetter(t, map[string]rawShape{
		"attempt-tiny": {func(it map[string]types.AttributeValue) {
			it[dynamo.AttrAttempt] = &types.AttributeValueMemberN{Value: "1E-130"}
		}, "claim refused: Number overflow"},
	})
}

// A producer writing due_at 0 ("due at once"): the oldest due age is the
// time since 1970, not a wrapped nanosecond count (it read about 272 years).
func TestSweep_ReportsTheOldestDueAgeOfARowDueAtEpochZero(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(h.store.Table()), Item: rawItem(h, "epoch", func(it map[string]types.AttributeValue) {
			it[dynamo.AttrDueAt] = &types.AttributeValueMemberN{Value: "0"}
		})})
	require.NoError(t, err)
	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	want := h.clock.Now().Sub(time.UnixMilli(0))
	require.InDelta(t, want.Hours(), res.OldestDueAge.Hours(), 1, "oldest due age %s", res.OldestDueAge)
}

// A row whose state is sound but whose stored history is unreadable is
// claimed and dead-lettered; the dead letter keeps that history under
// errors_unreadable, as a quarantine does, rather than overwrite it.
func TestSweep_DeadLetterKeepsAnUnreadableHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(h.store.Table()), Item: rawItem(h, "hist", func(it map[string]types.AttributeValue) {
			it[dynamo.AttrErrors] = &types.AttributeValueMemberS{Value: "written by the producer"}
		})})
	require.NoError(t, err)
	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLettered)
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(h.store.Table()),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: "hist"}}})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: "written by the producer"}, out.Item[dynamo.AttrErrorsUnreadable], "item now: errors=%v", out.Item[dynamo.AttrErrors])
}

// A producer in another language writes a row as claimed but leaves out
// lease_until. No worker holds it (Outflow writes a lease with every
// claim), so the next sweep claims it as under a lapsed lease and delivers
// it, rather than leaving it claimed for ever.
func TestSweep_DeliversAClaimedRowWithNoLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(h.store.Table()), Item: rawItem(h, "no-lease", func(it map[string]types.AttributeValue) {
			it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "claimed"}
			it[dynamo.AttrAttempt] = &types.AttributeValueMemberN{Value: "1"}
		})})
	require.NoError(t, err)
	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Claimed, "%+v", res)
	require.Equal(t, 1, res.Delivered, "%+v", res)
	require.Zero(t, res.DeadLettered, "%+v", res)
	require.False(t, inDueIndex(t, h, "no-lease"))
}
