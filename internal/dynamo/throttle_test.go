package dynamo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// TestIsThrottle_KnowsDynamoDBsThrottlesAndTheRetryQuota classifies the
// errors a DynamoDB call can end with.
func TestIsThrottle_KnowsDynamoDBsThrottlesAndTheRetryQuota(t *testing.T) {
	t.Parallel()
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"partition throughput", &types.ProvisionedThroughputExceededException{Message: aws.String("m")}, true},
		{"table or account", api("ThrottlingException"), true},
		{"account request rate", &types.RequestLimitExceeded{Message: aws.String("m")}, true},
		{"after the SDK's attempts", &retry.MaxAttemptsError{Attempt: 4, Err: api("ThrottlingException")}, true},
		{"retry quota spent", errors.Join(api("InternalServerError"), fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{Available: 0, Requested: 5})), true},
		{"transaction throttled", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("None")}, {Code: aws.String("ThrottlingError")}}}, true},
		{"refused condition", &types.ConditionalCheckFailedException{}, false},
		{"transaction refused", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("ConditionalCheckFailed")}}}, false},
		{"server error", api("InternalServerError"), false},
		{"plain", errors.New("connection reset"), false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, dynamo.IsThrottle(c.err), c.name)
	}
}

// throttlingTransport answers the next refuse DeleteItem requests (the
// done write) as DynamoDB answers a throttled one, and passes every other
// request to the moto server.
type throttlingTransport struct {
	mu      sync.Mutex
	refuse  int
	refused int
}

func (tr *throttlingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr.mu.Lock()
	throttle := req.Header.Get("X-Amz-Target") == "DynamoDB_20120810.DeleteItem" && tr.refuse > 0
	if throttle {
		tr.refuse--
		tr.refused++
	}
	tr.mu.Unlock()
	if !throttle {
		return http.DefaultTransport.RoundTrip(req)
	}
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}`
	return &http.Response{
		StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:          io.NopCloser(bytes.NewBufferString(body)),
		ContentLength: int64(len(body)), Request: req,
	}, nil
}

// sendCounter accepts every row and counts the sends per key.
type sendCounter struct {
	mu   sync.Mutex
	sent map[string]int
}

func (c *sendCounter) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		c.sent[r.Key]++
	}
	return make([]error, len(rows))
}

// TestSweep_RetriesAThrottledDoneAndSendsTheRowOnce runs the engine over
// the moto server with a client (two attempts a request, as the SDK
// retries throttles) whose done writes are throttled: once, which the
// SDK's retry absorbs, and three times, which outlasts it so the engine
// tries the done again. Either way the row is settled and sent once, and
// the sweep halved its claim concurrency at the first throttled attempt,
// which only the client's middleware sees when the SDK's retry absorbs it.
func TestSweep_RetriesAThrottledDoneAndSendsTheRowOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		refuse    int
		throttled int
	}{
		{name: "retried by the SDK", refuse: 1, throttled: 0},
		{name: "outlasting the SDK's retries", refuse: 3, throttled: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tr := &throttlingTransport{refuse: c.refuse}
			client := dynamodb.NewFromConfig(awstest.TestConfig(t), func(o *dynamodb.Options) {
				o.DisableValidateResponseChecksum = true
				o.HTTPClient = sdkhttp.Client(&http.Client{Transport: tr})
				o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
					so.MaxAttempts = 2
					so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
				})
			})
			s, err := dynamo.New(client, dynamo.Config{Table: awstest.NewTable(t), Shards: 1})
			require.NoError(t, err)
			ctx := context.Background()
			now := time.Now()
			require.NoError(t, s.Stage(ctx, outbox.Row{Key: "k1", Queue: "orders", Payload: []byte(`{}`)}, now.Add(-time.Minute)))
			sink := &sendCounter{sent: map[string]int{}}
			p := outbox.DefaultPolicy()
			p.WakeGrace = 0
			e, err := outbox.New(s, sink, p)
			require.NoError(t, err)
			res, err := e.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, c.refuse, tr.refused, "every throttle was answered")
			require.Equal(t, 1, res.Delivered)
			require.Zero(t, res.Errors)
			require.Equal(t, c.throttled, res.Throttled, "throttles that reached the engine")
			require.Equal(t, p.Concurrency/2, res.ClaimConcurrency, "halved once, at the first throttled attempt")
			row, err := s.Get(ctx, "k1")
			require.NoError(t, err)
			require.Nil(t, row, "settled done")
			again, err := e.Sweep(ctx)
			require.NoError(t, err)
			require.Zero(t, again.Claimed)
			require.Equal(t, map[string]int{"k1": 1}, sink.sent, "sent once")
		})
	}
}
