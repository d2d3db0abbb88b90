package handler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/version"
)

// Each cold start publishes the function's configuration at its first
// invocation, and writes it only when it changed: the sweep and the wake
// of one deploy publish it once between them.
func TestHandlers_PublishTheirConfigurationOncePerChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, orders := awstest.NewTable(t), awstest.NewQueue(t, false)
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + orders, "OUTFLOW_SHARDS": "4",
		"OUTFLOW_WAKE_GRACE": "0s", "AWS_LAMBDA_FUNCTION_NAME": "outflow-sweep"}
	coldStart := func() (*handler.Runtime, *syncBuffer) {
		out := &syncBuffer{}
		rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, out)
		require.NoError(t, err)
		return rt, out
	}
	published := func(out *syncBuffer) int { return strings.Count(out.String(), `"msg":"published configuration"`) }

	_, err := dynamo.ReadPublished(ctx, awstest.DynamoDB(t), table)
	require.ErrorIs(t, err, dynamo.ErrNotPublished, "Setup alone publishes nothing")

	rt, out := coldStart()
	sweep := handler.NewSweep(rt)
	for range 2 {
		_, err := sweep.Handle(ctx, json.RawMessage(`{}`))
		require.NoError(t, err)
	}
	require.Equal(t, 1, published(out), out.String())
	pub, err := dynamo.ReadPublished(ctx, awstest.DynamoDB(t), table)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"orders": orders}, pub.Routes)
	require.Equal(t, map[string]string{}, pub.Ordered)
	require.Equal(t, 4, pub.Shards)
	require.Equal(t, 262144, pub.MaxMessageBytes)
	require.Equal(t, 159334*time.Millisecond, pub.UnsureWait, "the default lease's: (5m − 2s) / 3 + 1m, rounded up to the millisecond")
	require.Equal(t, "outflow-sweep", pub.PublishedBy)
	require.Equal(t, int64(1), pub.Revision)
	require.Equal(t, version.Version, pub.Version, "the dispatcher's release version")

	// The wake's cold start, same configuration: nothing written.
	rt, out = coldStart()
	_, err = handler.NewWake(rt).Handle(ctx, events.DynamoDBEvent{})
	require.NoError(t, err)
	require.Zero(t, published(out))
	again, err := dynamo.ReadPublished(ctx, awstest.DynamoDB(t), table)
	require.NoError(t, err)
	require.Equal(t, pub, again)

	// A deploy that adds an ordered route publishes it.
	events := awstest.NewQueue(t, true)
	env["OUTFLOW_ROUTES"] += ",events.fifo=" + events
	env["OUTFLOW_ORDERED"] = "events.fifo=skip"
	rt, out = coldStart()
	_, err = handler.NewSweep(rt).Handle(ctx, json.RawMessage(`{}`))
	require.NoError(t, err)
	require.Equal(t, 1, published(out))
	pub, err = dynamo.ReadPublished(ctx, awstest.DynamoDB(t), table)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"orders": orders, "events.fifo": events}, pub.Routes)
	require.Equal(t, map[string]string{"events.fifo": "skip"}, pub.Ordered)
	require.Equal(t, int64(2), pub.Revision)
}
