package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/streams"
)

// TestReviewLean_TheWakeDropsALeanRowFromAProducerWhoseClockIsAhead: a
// producer's clock a few seconds ahead of the wake's stages a lean row
// whose due_at (= created_at, the producer's now) is still in the future
// when its stream record reaches the wake. DueInserts skips the record
// ("not due yet", not even logged), and nothing puts the row in the due
// index: it is pending with no shard, seen by no sweep, and only the
// backstop's next pass over the whole table finds it (counted as a row
// the stream missed, MissedRowsAlarm, though the stream missed nothing).
// Before lean, the same record was skipped too, but the row was in the
// due index and the sweep took it after the grace.
func TestReviewLean_TheWakeDropsALeanRowFromAProducerWhoseClockIsAhead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue, "OUTFLOW_LEAN": "true"}
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, &syncBuffer{})
	require.NoError(t, err)
	wake := handler.NewWake(rt)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)

	const skew = 5 * time.Minute
	staged := time.Now()
	require.NoError(t, store.Stage(ctx, outbox.Row{Key: "ahead", Queue: "orders", Payload: []byte("a"), Unindexed: true}, staged.Add(skew)))

	desc, err := awstest.DynamoDB(t).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	arn := aws.ToString(desc.Table.LatestStreamArn)
	poller := streams.NewPoller(dynamodbstreams.NewFromConfig(awstest.TestConfig(t)), arn, streamtypes.ShardIteratorTypeTrimHorizon)
	var records []streamtypes.Record
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := poller.Poll(ctx, 100)
		require.NoError(c, err)
		records = append(records, got...)
		require.NotEmpty(c, records)
	}, 30*time.Second, 100*time.Millisecond)
	require.Less(t, time.Since(staged), skew, "the row must still be ahead of the wake's clock")
	_, err = wake.Handle(ctx, streams.Event(arn, "us-east-1", records))
	require.NoError(t, err)

	got, err := store.Get(ctx, "ahead")
	require.NoError(t, err)
	require.NotNil(t, got)
	require.False(t, got.Status == outbox.StatusPending && got.Unindexed,
		"the wake left a lean row it did not send outside the due index: %+v", got)
}
