package handler_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
)

// TestReview25_AnOldVersionsColdStartDoesNotLeaveItsConfigurationPublished:
// during a deploy the sweep and the wake are updated one after the other,
// so a wake environment of the old configuration can cold-start after the
// new sweep has published. Publish is last-writer-wins (the revision only
// serialises writers, it does not say which configuration is newer), and
// the new sweep, already warm, never publishes again: the item keeps the
// old configuration (here events.fifo=skip while the dispatcher runs
// block) until some later cold start. outflow sweep and the producers
// take it as the dispatcher's, so a CLI sweep run with no settings of its
// own skips a dead head the dispatcher holds its group behind.
func TestReview25_AnOldVersionsColdStartDoesNotLeaveItsConfigurationPublished(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, orders, fifo := awstest.NewTable(t), awstest.NewQueue(t, false), awstest.NewQueue(t, true)
	old := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + orders + ",events.fifo=" + fifo,
		"OUTFLOW_ORDERED": "events.fifo=skip", "OUTFLOW_SHARDS": "4", "OUTFLOW_WAKE_GRACE": "0s", "AWS_LAMBDA_FUNCTION_NAME": "outflow-wake"}
	newer := maps.Clone(old)
	newer["OUTFLOW_ORDERED"] = "events.fifo=block"
	newer["AWS_LAMBDA_FUNCTION_NAME"] = "outflow-sweep"
	coldStart := func(env map[string]string) *handler.Runtime {
		rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, &syncBuffer{})
		require.NoError(t, err)
		return rt
	}

	// The new sweep's first invocation publishes block.
	sweep := handler.NewSweep(coldStart(newer))
	_, err := sweep.Handle(ctx, json.RawMessage(`{}`))
	require.NoError(t, err)
	// An old wake environment starts before its function is updated.
	_, err = handler.NewWake(coldStart(old)).Handle(ctx, events.DynamoDBEvent{})
	require.NoError(t, err)
	// The deploy is over: only the new sweep runs, warm, invocation after invocation.
	for range 3 {
		_, err = sweep.Handle(ctx, json.RawMessage(`{}`))
		require.NoError(t, err)
	}
	pub, err := dynamo.ReadPublished(ctx, awstest.DynamoDB(t), table)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"events.fifo": "block"}, pub.Ordered,
		"the published configuration is the old version's (by %s, revision %d), not what the running dispatcher runs with", pub.PublishedBy, pub.Revision)
}
