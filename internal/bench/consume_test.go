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
