package local

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
)

// invokeEndpoint serves q's Invoke API and returns a Lambda client for it.
func invokeEndpoint(t *testing.T, q *asyncQueue) *lambda.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(invokePath, q)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
}

// TestAsyncQueue_TakesTheSweepsOwnInvokesAsLambdaWould: the bootstrap's
// LambdaInvoker, through the SDK, queues a partition event; an invoke of
// another function, a synchronous one and one past a full queue get
// Lambda's own errors, which the SDK decodes.
func TestAsyncQueue_TakesTheSweepsOwnInvokesAsLambdaWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := newAsyncQueue("outflow-x-sweep", 1, time.Minute)
	client := invokeEndpoint(t, q)

	p := outbox.Partition{Index: 1, Count: 2}
	require.NoError(t, handler.LambdaInvoker{API: client, Function: q.function}.Invoke(ctx, handler.PartitionEvent{Partition: p}))
	ev := <-q.events
	var got outbox.Partition
	require.NoError(t, json.Unmarshal(ev.payload, &got))
	require.Equal(t, p, got)

	var notFound *types.ResourceNotFoundException
	require.ErrorAs(t, handler.LambdaInvoker{API: client, Function: "another"}.Invoke(ctx, handler.PartitionEvent{Partition: p}), &notFound)

	_, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(q.function), Payload: []byte(`{}`)})
	var invalid *types.InvalidParameterValueException
	require.ErrorAs(t, err, &invalid, "only asynchronous invokes")

	require.NoError(t, handler.LambdaInvoker{API: client, Function: q.function}.Invoke(ctx, handler.PartitionEvent{Partition: p}))
	var throttled *types.TooManyRequestsException
	require.ErrorAs(t, handler.LambdaInvoker{API: client, Function: q.function}.Invoke(ctx, handler.PartitionEvent{Partition: p}), &throttled, "the queue holds one event")
	require.Len(t, q.events, 1)
}

// TestAsyncQueue_InProcessInvokesQueueUntilFull: the in-process sweep's
// Invoker queues each partition's event and refuses one past the queue's
// size, which the fan-out then counts as an error.
func TestAsyncQueue_InProcessInvokesQueueUntilFull(t *testing.T) {
	t.Parallel()
	q := newAsyncQueue("sweep", 2, 0)
	var inv handler.Invoker = q
	for i := 1; i <= 2; i++ {
		require.NoError(t, inv.Invoke(context.Background(), handler.PartitionEvent{Partition: outbox.Partition{Index: i, Count: 3}, Until: int64(i)}))
	}
	require.ErrorIs(t, inv.Invoke(context.Background(), handler.PartitionEvent{Partition: outbox.Partition{Index: 1, Count: 3}}), errQueueFull)
	for _, want := range []string{`{"partition":1,"of":3,"until":1}`, `{"partition":2,"of":3,"until":2}`} {
		require.JSONEq(t, want, string((<-q.events).payload))
	}
}
