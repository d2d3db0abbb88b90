package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/streams"
)

// TestLean_TheWakeDeliversLeanRowsWithNoIndexWriteAndTheBackstopFindsTheOnesTheStreamMissed
// runs both functions of a lean stack on the moto server: the producer
// reads lean from what the functions publish, the wake delivers its rows
// from their real stream records without one write carrying a shard (so
// no due-index write at all), and a row whose record never reached the
// wake is found by the scheduled sweep's backstop and delivered.
func TestLean_TheWakeDeliversLeanRowsWithNoIndexWriteAndTheBackstopFindsTheOnesTheStreamMissed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue, "OUTFLOW_LEAN": "true"}
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, &syncBuffer{})
	require.NoError(t, err)
	sweep, wake := handler.NewSweep(rt), handler.NewWake(rt)

	// Phase 1: the functions publish lean; a producer loads it.
	_, err = sweep.Handle(ctx, nil)
	require.NoError(t, err)
	pub, err := outflow.LoadPublished(ctx, awstest.DynamoDB(t), table)
	require.NoError(t, err)
	require.True(t, pub.Lean)
	cfg, err := pub.Apply(outflow.Config{})
	require.NoError(t, err)
	producer, err := outflow.NewProducer(awstest.DynamoDB(t), cfg)
	require.NoError(t, err)

	// Phase 2: the wake delivers what the producer stages, from the stream.
	keys, err := producer.Put(ctx,
		outflow.Row{Key: "lean-1", Queue: "orders", Payload: []byte("1")},
		outflow.Row{Key: "lean-2", Queue: "orders", Payload: []byte("2")})
	require.NoError(t, err)
	desc, err := awstest.DynamoDB(t).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	arn := aws.ToString(desc.Table.LatestStreamArn)
	poller := streams.NewPoller(dynamodbstreams.NewFromConfig(awstest.TestConfig(t)), arn, streamtypes.ShardIteratorTypeTrimHorizon)
	var records []streamtypes.Record
	poll := func(want func([]streamtypes.Record) bool) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := poller.Poll(ctx, 100)
			require.NoError(c, err)
			records = append(records, got...)
			require.True(c, want(records))
		}, 30*time.Second, 100*time.Millisecond)
	}
	inserts := func(recs []streamtypes.Record) (n int) {
		for _, r := range recs {
			if r.EventName == streamtypes.OperationTypeInsert && r.Dynamodb.NewImage["status"] != nil {
				n++
			}
		}
		return n
	}
	poll(func(recs []streamtypes.Record) bool { return inserts(recs) >= 2 })
	var rows []streamtypes.Record
	for _, r := range records {
		if r.EventName == streamtypes.OperationTypeInsert && r.Dynamodb.NewImage["status"] != nil {
			rows = append(rows, r)
		}
	}
	sum, err := wake.Handle(ctx, streams.Event(arn, "us-east-1", rows))
	require.NoError(t, err)
	require.Empty(t, sum.BatchItemFailures)
	require.ElementsMatch(t, keys, awstest.ReceiveKeys(t, queue, 2, 20*time.Second))
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	for _, k := range keys {
		row, err := store.Get(ctx, k)
		require.NoError(t, err)
		require.True(t, awstest.SettledDone(row), "%s: %+v", k, row)
	}
	// Every write of a row is a stream record with its new image: none
	// carried a shard, so none wrote the due index.
	poll(func(recs []streamtypes.Record) bool { return len(recs) >= 4 })
	for _, r := range records {
		if _, isRow := r.Dynamodb.NewImage["status"]; !isRow {
			continue
		}
		_, shard := r.Dynamodb.NewImage[dynamo.AttrShard]
		require.False(t, shard, "%s %v wrote a shard", r.EventName, r.Dynamodb.Keys)
	}

	// Phase 3: a lean row whose record never reached the wake (staged a
	// minute ago: past the wake grace) is found by the sweep's backstop.
	require.NoError(t, store.Stage(ctx, outbox.Row{Key: "missed", Queue: "orders", Payload: []byte("m"), Unindexed: true}, time.Now().Add(-time.Minute)))
	res, err := sweep.Handle(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.MissedRows, "%+v", res)
	require.GreaterOrEqual(t, res.MissedRowWaitMs, int64(time.Minute/time.Millisecond))
	require.Equal(t, 1, res.Delivered, "the same sweep delivers it: %+v", res)
	require.Equal(t, []string{"missed"}, awstest.ReceiveKeys(t, queue, 1, 20*time.Second))
	counts, err := store.Backstopped(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, counts.Total)
}

// A lean function notes lean for the backstop at its cold start whether
// or not its publish writes: the instance that wrote the configuration
// may have failed to note it, and a dispatcher switched off lean before
// the first scheduled sweep would then never look for the rows staged
// lean meanwhile (review of issue 50).
func TestLean_EveryColdStartNotesLeanEvenWhenTheConfigurationIsAlreadyPublished(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue, "OUTFLOW_LEAN": "true"}
	coldStart := func() *handler.Runtime {
		rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, &syncBuffer{})
		require.NoError(t, err)
		return rt
	}
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 1})
	require.NoError(t, err)
	leanAt := func() time.Time {
		t.Helper()
		counts, err := store.Backstopped(ctx)
		require.NoError(t, err)
		return counts.LeanAt
	}

	// Phase 1: the first cold start publishes lean and notes it.
	_, err = handler.NewWake(coldStart()).Handle(ctx, events.DynamoDBEvent{})
	require.NoError(t, err)
	require.False(t, leanAt().IsZero(), "the first publish notes lean")

	// Phase 2: as if that note had failed, the backstop item has none.
	_, err = awstest.DynamoDB(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:              map[string]ddbtypes.AttributeValue{dynamo.AttrKey: &ddbtypes.AttributeValueMemberS{Value: dynamo.BackstopKey}},
		UpdateExpression: aws.String("REMOVE lean_at")})
	require.NoError(t, err)
	require.True(t, leanAt().IsZero())

	// Phase 3: the next cold start (a wake, which runs no backstop) finds
	// the configuration current and writes none of it, and notes lean all
	// the same.
	_, err = handler.NewWake(coldStart()).Handle(ctx, events.DynamoDBEvent{})
	require.NoError(t, err)
	require.False(t, leanAt().IsZero(), "a cold start that publishes nothing still notes lean")
}
