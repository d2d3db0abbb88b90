package outbox_test

// Adversarial review of the purge hold (71ba2ec), invariant 4: a dead
// head whose send is classified definite though an earlier try of the
// same call may have been stored.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// The SDK retries a call inside the CallTimeout: its first try reaches
// SQS (here: is stored) but answers 500, its second answers the entry as
// Failed (a throttle). The deliverer reads only the last answer: refused,
// definite, no unsure_at. But the docs count a 5xx as "may have been
// stored, and later": the first try is exactly such a request. So the
// purge does not hold the dead head (and skip does not wait it out),
// while a copy of it is in SQS. Here the copy is already there; with the
// late storing the docs assume (UnsureMargin) it would land after the
// successor the purge lets go.
func TestAdv_AnEntryRefusedAfterAnSDKRetryOfAStoredTryIsNotDefinite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]

	moto, err := url.Parse(awstest.Endpoint())
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(moto)
	var mu sync.Mutex
	batches := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessageBatch" {
			rp.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		batches++
		n := batches
		mu.Unlock()
		if n == 1 {
			// Stored, but the answer is a 500.
			r.Body = io.NopCloser(bytes.NewReader(body))
			rp.ServeHTTP(httptest.NewRecorder(), r)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#InternalError","message":"injected"}`))
			return
		}
		var in struct{ Entries []struct{ Id string } }
		_ = json.Unmarshal(body, &in)
		var failed []map[string]any
		for _, e := range in.Entries {
			failed = append(failed, map[string]any{"Id": e.Id, "SenderFault": true, "Code": "RequestThrottled", "Message": "injected"})
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_ = json.NewEncoder(w).Encode(map[string]any{"Successful": []any{}, "Failed": failed})
	}))
	t.Cleanup(proxy.Close)
	client := sqs.NewFromConfig(awstest.TestConfig(t), func(o *sqs.Options) { o.BaseEndpoint = aws.String(proxy.URL) })
	router, err := delivery.New(delivery.Clients{SQS: client}, h.routes, 0)
	require.NoError(t, err)

	p := orderedPolicy(outbox.DeadHeadBlock)
	p.MaxAttempts = 1
	_, err = h.engine(t, p, router).Sweep(ctx)
	require.NoError(t, err)
	mu.Lock()
	require.Equal(t, 2, batches, "the SDK retried the 500 inside one call")
	mu.Unlock()
	head := h.row(t, keys[0])
	require.Equal(t, outbox.StatusFailed, head.Status)
	t.Logf("head: %s, unsure_at %v, history %+v", head.Status, head.UnsureAt, head.Errors)

	// A copy of the head is in SQS.
	got, err := awstest.SQS(t).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(h.routes["events.fifo"]), MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1, "the first try was stored")

	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)
	now := h.clock.Now()
	res, err := operate.Purge(ctx, op, keys[:1], operate.Selection{}, now, operate.Hold{Now: now, Wait: p.UnsureWait()}, nil)
	require.NoError(t, err)
	require.False(t, head.UnsureAt.IsZero(), "a send one try of which got a 5xx is of unknown outcome; purge result %+v", res)
	require.Equal(t, 1, res.Held, "%+v", res)
}
