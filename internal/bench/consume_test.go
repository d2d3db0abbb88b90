package bench_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/delivery"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// TestConsume_CountsAMessageSQSDeliversAgainAsOneArrival makes the
// consumer's first delete fail per entry, as SQS does for a receipt handle
// that is no longer valid: SQS then delivers those messages again, and each
// must still count once.
func TestConsume_CountsAMessageSQSDeliversAgainAsOneArrival(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := awstest.NewQueue(t, false)
	client := awstest.SQS(t)
	// A short visibility timeout, so the undeleted messages come back soon.
	_, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"VisibilityTimeout": "1"}})
	require.NoError(t, err)
	for _, key := range []string{"a", "b", "a"} {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("{}"),
			MessageAttributes: map[string]types.MessageAttributeValue{delivery.AttrKey: {DataType: aws.String("String"), StringValue: aws.String(key)}}})
		require.NoError(t, err)
	}

	var deletes atomic.Int32
	stop := make(chan struct{})
	consumer := sqs.NewFromConfig(awstest.TestConfig(t), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("spoil-first-delete", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if del, ok := in.Parameters.(*sqs.DeleteMessageBatchInput); ok {
					switch deletes.Add(1) {
					case 1:
						for i := range del.Entries {
							del.Entries[i].ReceiptHandle = aws.String(fmt.Sprintf("not-a-receipt-handle-%d", i))
						}
					case 2: // the redelivered messages: the test has seen what it needs
						close(stop)
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
		})
	})
	got, err := bench.Consume(ctx, consumer, url, stop)
	require.NoError(t, err)

	require.Equal(t, map[string]int{"a": 2, "b": 1}, got.Arrivals, "one arrival per message SQS accepted")
	require.Positive(t, got.DeleteFailed)
	require.Equal(t, got.DeleteFailed, got.Redelivered, "every message whose delete failed came back once")
}

func TestMessageKey_ReadsTheKeyOfEveryTargetsMessage(t *testing.T) {
	t.Parallel()
	attr := func(k string) map[string]types.MessageAttributeValue {
		return map[string]types.MessageAttributeValue{delivery.AttrKey: {DataType: aws.String("String"), StringValue: aws.String(k)}}
	}
	tests := []struct {
		name string
		msg  types.Message
		want string
	}{
		{"a queue route's message", types.Message{Body: aws.String(`{"n":1}`), MessageAttributes: attr("q-1")}, "q-1"},
		{"a topic's message, raw delivery", types.Message{Body: aws.String("not json"), MessageAttributes: attr("t-1")}, "t-1"},
		{"a bus's event, sent on by a rule", types.Message{Body: aws.String(`{"source":"s","detail":{"outflow":{"key":"e-1","attempt":2},"n":1}}`)}, "e-1"},
		{"a body with no key", types.Message{Body: aws.String(`{"detail":{}}`)}, ""},
		{"a body that is not JSON", types.Message{Body: aws.String("x")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, bench.MessageKey(tt.msg))
		})
	}
}

// TestDrainTargets_DeliversEveryRowToEachTarget drains a few rows to a
// queue, a topic and a bus on moto and reads every one back from the queue
// behind each, counting one send request per batch.
func TestDrainTargets_DeliversEveryRowToEachTarget(t *testing.T) {
	t.Parallel()
	const rows = 25
	res, err := bench.DrainTargets(context.Background(), awstest.Endpoint(), rows, 200)
	require.NoError(t, err)
	require.Len(t, res, len(bench.TargetKinds))
	for i, r := range res {
		require.Equal(t, bench.TargetKinds[i], r.Kind)
		require.Equal(t, rows, r.Throughput.Rows, "%s: rows delivered", r.Kind)
		require.Equal(t, rows, r.Arrived, "%s: rows read back", r.Kind)
		sends := r.Dispatch.Count(bench.SendOp[r.Kind])
		require.GreaterOrEqual(t, sends, (rows+9)/10, "%s: at most ten rows a request", r.Kind)
		require.LessOrEqual(t, sends, rows, "%s: batched", r.Kind)
		for _, other := range bench.TargetKinds {
			if other != r.Kind {
				require.Zero(t, r.Dispatch.Count(bench.SendOp[other]), "%s: no %s requests", r.Kind, other)
			}
		}
	}
}
