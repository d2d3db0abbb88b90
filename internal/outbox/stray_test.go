package outbox_test

import (
	"context"
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

// An ordered group whose head a producer wrote on a shard the sweep never
// queries (here "9" of 4): the head is never claimed, so the rest of the
// group waits behind it. Once the audit moves the head to its key's
// shard, the group goes, in order: the head check reads a predecessor by
// key, not by shard.
func TestSweep_DeliversAnOrderedGroupInOrderOnceTheAuditMovesItsStrayHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 4)["g"]
	h.setRaw(t, keys[0], dynamo.AttrShard, &types.AttributeValueMemberS{Value: "9"})
	log := &sendLog{next: h.sqs}

	res, err := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log).Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Delivered, "the stray head is never swept, and its group waits: %+v", res)

	a, err := dynamo.NewAudit(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	ar, err := a.Run(ctx, h.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 1, ar.Moved, "%+v", ar.Found)
	require.Equal(t, keys[0], ar.Found[0].Key)

	res, err = h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, res.Delivered, "%+v", res)
	require.Equal(t, map[string][]string{"g": keys}, log.accepted())
	log.oneInFlight(t)
}

// Stray rows of every kind the audit meets, as a producer in another
// language writes them: each is delivered after the audit moves it, or
// dead-lettered with its reason when it is malformed too. None is left in
// the due index.
func TestSweep_DeliversOrDeadLettersEveryStrayRowTheAuditMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	tests := []struct {
		key, shard string
		mutate     func(map[string]types.AttributeValue)
		reason     string // empty: delivered
	}{
		{"past-count", "7", nil, ""},
		{"not-a-number", "x", nil, ""},
		{"negative", "-1", nil, ""},
		{"zero-padded", "04", nil, ""},
		{"claimed-no-lease", "5", func(it map[string]types.AttributeValue) {
			it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "claimed"}
		}, ""},
		{"done-in-index", "9", func(it map[string]types.AttributeValue) {
			it[dynamo.AttrStatus] = &types.AttributeValueMemberS{Value: "done"}
		}, "malformed: malformed item: done, yet still in the due index"},
	}
	for _, tt := range tests {
		_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(h.store.Table()), Item: rawItem(h, tt.key, func(it map[string]types.AttributeValue) {
			it[dynamo.AttrShard] = &types.AttributeValueMemberS{Value: tt.shard}
			if tt.mutate != nil {
				tt.mutate(it)
			}
		})})
		require.NoError(t, err, tt.key)
	}
	a, err := dynamo.NewAudit(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	ar, err := a.Run(ctx, h.clock.Now())
	require.NoError(t, err)
	require.Equal(t, len(tests), ar.Moved, "%+v", ar.Found)
	res, err := h.engine(t, testPolicy(), nil).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, len(tests)-1, res.Delivered, "%+v", res)
	require.Equal(t, 1, res.DeadLettered, "%+v", res)
	for _, tt := range tests {
		require.False(t, inDueIndex(t, h, tt.key), tt.key)
		if tt.reason != "" {
			got, _ := h.store.Get(ctx, tt.key)
			require.NotNil(t, got, tt.key)
			require.Equal(t, outbox.StatusFailed, got.Status, tt.key)
			require.Contains(t, got.LastError, tt.reason, tt.key)
		}
	}
}

// A producer in another language may write a pending row with no shard:
// it is in no index, and only the wake (by its stream record) claims it.
// If that attempt fails, or is released unsent, the row goes back to
// pending with its key's shard, where the sweep finds it again; before, it
// went back to no index at all, for ever (found by review 13b).
func TestSweep_FindsARowWithNoShardOnceTheWakeRetriedOrReleasedIt(t *testing.T) {
	t.Parallel()
	for _, release := range []bool{false, true} {
		t.Run(map[bool]string{false: "retried", true: "released"}[release], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarness(t)
			h.stage(t, outbox.Row{Key: "no-shard", Queue: "orders", Payload: []byte(`{}`)})
			_, err := awstest.DynamoDB(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(h.store.Table()), Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: "no-shard"}},
				UpdateExpression: aws.String("REMOVE #s"), ExpressionAttributeNames: map[string]string{"#s": dynamo.AttrShard},
			})
			require.NoError(t, err)
			res, err := h.engine(t, testPolicy(), nil).Sweep(ctx)
			require.NoError(t, err)
			require.Zero(t, res.Claimed, "in no index: the sweep cannot see it")

			// The wake's attempt fails, or the row is released unsent.
			row, err := h.store.Claim(ctx, "no-shard", h.clock.Now(), time.Minute, 3)
			require.NoError(t, err)
			if release {
				require.NoError(t, h.store.Release(ctx, row))
			} else {
				require.NoError(t, h.store.Retry(ctx, row, h.clock.Now(), nil))
			}
			res, err = h.engine(t, testPolicy(), nil).Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, res.Delivered, "back in the due index, on its key's shard: %+v", res)
			h.gone(t, "no-shard")
		})
	}
}
