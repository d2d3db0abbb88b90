package dynamo_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestShardFor_PutsAnOrderedGroupsRowsOnItsGroupsShardAndOthersOnTheirKeys(t *testing.T) {
	t.Parallel()
	const shards = 16
	group := dynamo.ShardOf(dynamo.GroupKey("events.fifo", "g"), shards)
	tests := []struct {
		name string
		row  outbox.Row
		want string
	}{
		{"ordered", outbox.Row{Key: "a", Queue: "events.fifo", Group: "g", Seq: 1}, group},
		{"ordered, later in the group", outbox.Row{Key: "zz-99", Queue: "events.fifo", Group: "g", Seq: 42, Prev: "zz-98"}, group},
		{"a group but no place: not ordered", outbox.Row{Key: "b", Queue: "events.fifo", Group: "g"}, dynamo.ShardOf("b", shards)},
		{"a place but no group", outbox.Row{Key: "c", Queue: "events.fifo", Seq: 3}, dynamo.ShardOf("c", shards)},
		{"unordered", outbox.Row{Key: "d", Queue: "orders"}, dynamo.ShardOf("d", shards)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, dynamo.ShardFor(tt.row, shards))
		})
	}
}

// stageGroup stages n rows of one ordered group and returns their keys.
func stageGroup(t *testing.T, st *dynamo.Store, group string, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = group + "-" + strconv.Itoa(i)
		require.NoError(t, st.StageOrdered(context.Background(), outbox.Row{Key: keys[i], Queue: "events.fifo", Group: group, Payload: []byte("x")}, t0))
	}
	return keys
}

// shardOfItem reads the shard attribute of a row's item.
func shardOfItem(t *testing.T, st *dynamo.Store, key string) string {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), getInput(st, key))
	require.NoError(t, err)
	sh, ok := out.Item[dynamo.AttrShard].(*types.AttributeValueMemberS)
	require.True(t, ok, "row %s has a shard", key)
	return sh.Value
}

func TestRedrive_PutsARowBackOnItsOwnShardAtOneWriteOrTwoForAnOrderedRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, api := newAudit(t, 1, 100)
	red, err := dynamo.New(api, dynamo.Config{Table: st.Table(), Shards: st.Shards()})
	require.NoError(t, err)
	keys := stageGroup(t, st, "g", 2)
	stage(t, st, "plain")
	for _, key := range []string{keys[0], "plain"} {
		row := claim(t, st, key, t0)
		require.NoError(t, st.DeadLetter(ctx, row, t0, nil))
	}
	api.take()

	tests := []struct {
		key, shard string
		writes     int
	}{
		{"plain", dynamo.ShardOf("plain", st.Shards()), 1},
		// The first write guesses an unordered row; its refusal carries
		// the item, and the second puts it on its group's shard.
		{keys[0], dynamo.ShardOf(dynamo.GroupKey("events.fifo", "g"), st.Shards()), 2},
	}
	for _, tt := range tests {
		require.NoError(t, red.Redrive(ctx, tt.key, t0))
		_, writes := api.take()
		require.Len(t, writes, tt.writes, tt.key)
		require.Equal(t, tt.shard, shardOfItem(t, st, tt.key), tt.key)
		require.Equal(t, outbox.StatusPending, get(t, st, tt.key).Status)
	}
	// A row that is not failed is refused, ordered or not.
	requireConflict(t, red.Redrive(ctx, keys[1], t0))
	requireConflict(t, red.Redrive(ctx, "plain", t0))
}

func TestAudit_MovesAStrayOrderedRowToItsGroupsShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, _ := newAudit(t, 1, 100)
	keys := stageGroup(t, st, "g", 2)
	putItem(t, st, "plain-stray", func(it map[string]types.AttributeValue) { it[dynamo.AttrShard] = s("9") })
	// A producer elsewhere wrote the group's second row on a shard no
	// sweep queries.
	_, err := awstest.DynamoDB(t).UpdateItem(ctx, setShard(st, keys[1], "9"))
	require.NoError(t, err)

	res, err := a.Run(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, 2, res.Moved, "%+v", res.Found)
	require.Equal(t, dynamo.ShardOf(dynamo.GroupKey("events.fifo", "g"), st.Shards()), shardOfItem(t, st, keys[1]))
	require.Equal(t, shardOfItem(t, st, keys[0]), shardOfItem(t, st, keys[1]), "with the rest of its group")
	require.Equal(t, dynamo.ShardOf("plain-stray", st.Shards()), shardOfItem(t, st, "plain-stray"))
}

func TestRetryAndRelease_GiveAnOrderedRowWithNoShardItsGroupsShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, release := range []bool{false, true} {
		t.Run(map[bool]string{false: "retry", true: "release"}[release], func(t *testing.T) {
			t.Parallel()
			st := newStore(t, 0)
			keys := stageGroup(t, st, "g", 1)
			_, err := awstest.DynamoDB(t).UpdateItem(ctx, removeShard(st, keys[0]))
			require.NoError(t, err)
			row := claim(t, st, keys[0], t0)
			if release {
				require.NoError(t, st.Release(ctx, row))
			} else {
				require.NoError(t, st.Retry(ctx, row, t0, nil))
			}
			require.Equal(t, dynamo.ShardOf(dynamo.GroupKey("events.fifo", "g"), st.Shards()), shardOfItem(t, st, keys[0]))
		})
	}
}

func getInput(st *dynamo.Store, key string) *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{dynamo.AttrKey: s(key)}, ConsistentRead: aws.Bool(true)}
}

// setShard writes a row's shard by hand, as a producer elsewhere might.
func setShard(st *dynamo.Store, key, shard string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{dynamo.AttrKey: s(key)},
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": dynamo.AttrShard},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": s(shard)},
	}
}

// removeShard takes a row out of the due index, as a producer that
// writes no shard leaves it.
func removeShard(st *dynamo.Store, key string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{dynamo.AttrKey: s(key)},
		UpdateExpression:         aws.String("REMOVE #s"),
		ExpressionAttributeNames: map[string]string{"#s": dynamo.AttrShard},
	}
}
