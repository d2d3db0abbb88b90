package handler_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
)

// emfStrayRows reads StrayRows from each sweep EMF line in out.
func emfStrayRows(t *testing.T, out string) []float64 {
	t.Helper()
	var got []float64
	for line := range strings.Lines(out) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["_aws"] == nil || rec["Function"] != "sweep" {
			continue
		}
		got = append(got, rec["StrayRows"].(float64))
	}
	return got
}

// Rows as a producer in another language writes them: two on shards a
// sweep of 4 shards never queries, and one claimed with no lease. One
// sweep invocation delivers all three; the audit's finds show in the
// summary, the metric and stats, and stats counts nothing claimed.
func TestSweepHandler_DeliversStrayRowsAndCountsThem(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue, "OUTFLOW_SHARDS": "4", "OUTFLOW_WAKE_GRACE": "0s"}
	out := &syncBuffer{}
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, out)
	require.NoError(t, err)

	due := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	rows := map[string]map[string]types.AttributeValue{
		"shard-7": {"shard": &types.AttributeValueMemberS{Value: "7"}},
		"shard-x": {"shard": &types.AttributeValueMemberS{Value: "x"}},
		"no-lease": {"shard": &types.AttributeValueMemberS{Value: dynamo.ShardOf("no-lease", 4)},
			"status": &types.AttributeValueMemberS{Value: "claimed"}, "attempt": &types.AttributeValueMemberN{Value: "1"}},
	}
	for key, over := range rows {
		item := map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: key}, "queue": &types.AttributeValueMemberS{Value: "orders"},
			"payload": &types.AttributeValueMemberS{Value: `{"k":"` + key + `"}`}, "status": &types.AttributeValueMemberS{Value: "pending"},
			"attempt": &types.AttributeValueMemberN{Value: "0"}, "created_at": &types.AttributeValueMemberN{Value: due},
			"due_at": &types.AttributeValueMemberN{Value: due},
		}
		for k, v := range over {
			item[k] = v
		}
		_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		require.NoError(t, err, key)
	}
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	before, err := op.Stats(ctx, time.Now(), nil)
	require.NoError(t, err)
	require.Equal(t, 1, before.Total.Claimed, "the claimed row, before the sweep")
	require.Equal(t, 0, before.Total.Pending, "the stray rows are on no shard stats reads")

	sum, err := handler.NewSweep(rt).Handle(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Delivered, "%+v", sum)
	require.Equal(t, 2, sum.StrayRows, "%+v", sum)
	require.Zero(t, sum.Errors+sum.DeadLettered, "%+v", sum)
	require.Len(t, awstest.Receive(t, queue, 3, 10*time.Second), 3)
	require.Contains(t, out.String(), `"msg":"stray row: its shard is never swept","key":"shard-7","shard":"7"`)

	after, err := op.Stats(ctx, time.Now(), nil)
	require.NoError(t, err)
	require.Equal(t, dynamo.AuditCounts{LastPass: 2, Total: 2}, after.Stray)
	require.Equal(t, dynamo.Counts{}, after.Total, "nothing claimed, pending or failed")

	// The next sweep finds none: all were moved and delivered.
	sum, err = handler.NewSweep(rt).Handle(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, sum.StrayRows)
	require.Equal(t, []float64{2, 0}, emfStrayRows(t, out.String()))
}

// slowWrites is DynamoDB answering each write in a second (a throttled table
// the SDK retries, a slow region): the audit's moves take that long each.
type slowWrites struct{ *dynamodb.Client }

func (c slowWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

// The audit runs before the sweep: a page of stray rows (here 100) on a
// slow table would use the whole invocation up (100 moves of a second,
// eight at a time: 13 s, in an invocation of 12 s). The audit gets the
// invocation less the sweep's margin, moves in its share of that (a
// quarter: 2.75 s; the moves under way then finish), eight at a time, and
// saves its place up to the last finished move; a move the share cut off
// is no error and is read again next run. The invocation is long enough
// that the sweep's own requests fit on a loaded machine (with 3 s, the
// test failed at random). Invariant: one bad
// row (here a producer's stray rows) never holds up others; errors say
// truthfully what happened; the audit's time is bounded (found by review
// 13b).
func TestSweepHandler_LeavesTheSweepMostOfTheInvocationWhenManyRowsAreStray(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue, "OUTFLOW_SHARDS": "4",
		"OUTFLOW_WAKE_GRACE": "0s", "OUTFLOW_DEADLINE_MARGIN": "1s"}
	out := &syncBuffer{}
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, out)
	require.NoError(t, err)
	rt.Audit, err = dynamo.NewAudit(slowWrites{awstest.DynamoDB(t)}, rt.Config.Store)
	require.NoError(t, err)

	due := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	put := func(key, shard string) {
		_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: key}, "queue": &types.AttributeValueMemberS{Value: "orders"},
			"payload": &types.AttributeValueMemberS{Value: `{}`}, "status": &types.AttributeValueMemberS{Value: "pending"},
			"attempt": &types.AttributeValueMemberN{Value: "0"}, "created_at": &types.AttributeValueMemberN{Value: due},
			"due_at": &types.AttributeValueMemberN{Value: due}, "shard": &types.AttributeValueMemberS{Value: shard},
		}})
		require.NoError(t, err)
	}
	put("good", dynamo.ShardOf("good", 4))
	for i := range 100 {
		put("stray-"+strconv.Itoa(i), "x")
	}
	ictx, cancel := context.WithTimeout(ctx, 12*time.Second)
	defer cancel()
	start := time.Now()
	sum, err := handler.NewSweep(rt).Handle(ictx, nil)
	require.NoError(t, err)
	t.Logf("after %s: %+v", time.Since(start).Round(time.Millisecond), sum)
	require.True(t, sum.Delivered >= 1 && sum.Errors == 0,
		"a 12 s invocation (1 s margin) with 100 stray rows to move: delivered %d (the due row on a swept shard waited), errors %d, stopped %q",
		sum.Delivered, sum.Errors, sum.Stopped)
	// The audit made progress and saved it: what it moved is counted.
	require.Positive(t, sum.StrayRows)
	counts, err := rt.Audit.Audited(ctx)
	require.NoError(t, err)
	require.Equal(t, sum.StrayRows, counts.Total, "%+v", counts)
	// Every stray row is either still on shard "x" or moved and counted:
	// no move the time share ended went uncounted.
	left, err := awstest.DynamoDB(t).Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), IndexName: aws.String(dynamo.DueIndex), Select: types.SelectCount,
		KeyConditionExpression:    aws.String("#s = :x"),
		ExpressionAttributeNames:  map[string]string{"#s": "shard"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberS{Value: "x"}},
	})
	require.NoError(t, err)
	require.Equal(t, 100, int(left.Count)+sum.StrayRows, "%d left on shard x", left.Count)
}
