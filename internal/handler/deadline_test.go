package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/handler"
)

// setup builds a runtime over endpoint (no AWS call is made at init) with
// the given variables on top of a valid minimum.
func setup(t *testing.T, endpoint string, vars map[string]string) (*handler.Runtime, *syncBuffer) {
	t.Helper()
	env := map[string]string{
		"OUTFLOW_TABLE":  "outbox",
		"OUTFLOW_ROUTES": "orders=https://sqs.us-east-1.amazonaws.com/123456789012/orders",
		"OUTFLOW_SHARDS": "1",
	}
	for k, v := range vars {
		env[k] = v
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}, BaseEndpoint: aws.String(endpoint)}
	out := &syncBuffer{}
	rt, err := handler.Setup(cfg, func(k string) string { return env[k] }, out)
	require.NoError(t, err)
	return rt, out
}

func TestSetup_RefusesALeaseThatDoesNotOutlastTheFunctionTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"lease equal to timeout", map[string]string{"OUTFLOW_FUNCTION_TIMEOUT": "5m"}, "OUTFLOW_FUNCTION_TIMEOUT=5m0s: lease (5m0s) must be longer than the invocation timeout"},
		{"margin fills the timeout", map[string]string{"OUTFLOW_FUNCTION_TIMEOUT": "10s"}, "OUTFLOW_FUNCTION_TIMEOUT=10s: deadline margin (10s) must be shorter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"OUTFLOW_TABLE": "outbox", "OUTFLOW_ROUTES": "orders=https://sqs.us-east-1.amazonaws.com/1/orders"}
			for k, v := range tt.vars {
				env[k] = v
			}
			_, err := handler.Setup(aws.Config{Region: "us-east-1"}, func(k string) string { return env[k] }, &bytes.Buffer{})
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestWake_RefusesAnInvocationShorterThanItsDeadlineMargin(t *testing.T) {
	t.Parallel()
	rt, out := setup(t, "http://127.0.0.1:9", nil) // default margin: 10s
	var ev events.DynamoDBEvent
	require.NoError(t, json.Unmarshal([]byte(`{"Records":[{"eventID":"1","eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"1"}}}}]}`), &ev))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := handler.NewWake(rt).Handle(ctx, ev)
	require.NoError(t, err, "the wake never fails a batch")
	require.Empty(t, resp.BatchItemFailures)
	require.Contains(t, out.String(), "wake refused: configuration unsafe for this timeout")
	require.Contains(t, out.String(), `deadline margin (10s) must be shorter than the invocation timeout`)
	require.Contains(t, out.String(), `"stopped":"refused"`)
}

func TestSweep_EveryAWSCallEndsInsideTheLease(t *testing.T) {
	t.Parallel()
	// An endpoint that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	rt, _ := setup(t, "http://"+ln.Addr().String(), map[string]string{
		"OUTFLOW_LEASE": "3s", "OUTFLOW_BATCH_LINGER": "0s", "OUTFLOW_DEADLINE_MARGIN": "1s",
	})
	// The invocation may run far longer than the lease: the hung query
	// must give up inside the lease all the same, and be counted.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const lease = 3 * time.Second
	started := time.Now()
	res, err := rt.Engine.Sweep(ctx)
	elapsed := time.Since(started)
	require.NoError(t, err)
	require.Equal(t, "drained", res.Stopped)
	require.Equal(t, 1, res.Errors, "the one shard's query timed out")
	// The subject itself: the hung call gave up inside the lease, not at
	// the invocation's minute. A slow machine only makes the rest of the
	// sweep (nothing: no answer ever comes) slower, not the call's bound.
	require.Less(t, elapsed, lease, "the sweep's hung query ended %s after it began, past the %s lease", elapsed.Round(time.Millisecond), lease)
}
