package awstest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// DynamoDB is a DynamoDB client for the test endpoint. moto's CRC32 header
// does not always match its body, so the client does not check it.
func DynamoDB(t testing.TB) *dynamodb.Client {
	return dynamodb.NewFromConfig(TestConfig(t), func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
}

// SQS is an SQS client for the test endpoint.
func SQS(t testing.TB) *sqs.Client { return sqs.NewFromConfig(TestConfig(t)) }

// NewTable creates an outbox table with a unique name, deleted after the
// test, and returns its name.
func NewTable(t testing.TB) string {
	t.Helper()
	client := DynamoDB(t)
	name := UniqueName("outflow-test")
	if err := dynamo.CreateTable(context.Background(), client, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), client, name) })
	return name
}

// NewQueue creates a queue with a unique name (FIFO if fifo), deleted after
// the test, and returns its URL.
func NewQueue(t testing.TB, fifo bool) string {
	t.Helper()
	return NewQueueOn(t, SQS(t), fifo)
}

// NewQueueOn is NewQueue on the endpoint client talks to.
func NewQueueOn(t testing.TB, client *sqs.Client, fifo bool) string {
	t.Helper()
	name := UniqueName("outflow-test")
	attrs := map[string]string{}
	if fifo {
		name += ".fifo"
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	return url
}

// Receive reads messages from a queue, deleting each, until it has want of
// them or timeout passes with no new message, and returns what it got. The
// timeout restarts at each message so that a loaded machine, where moto
// answers slowly, only slows a test that is receiving: it never fails one
// whose messages are still arriving.
func Receive(t testing.TB, url string, want int, timeout time.Duration) []types.Message {
	t.Helper()
	client := SQS(t)
	ctx := context.Background()
	var got []types.Message
	deadline := time.Now().Add(timeout)
	for len(got) < want && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(url),
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			deadline = time.Now().Add(timeout)
		}
		for _, m := range out.Messages {
			got = append(got, m)
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

// ReceiveKeys is Receive reduced to each message's row key (the
// outflow.key attribute) in arrival order: what order tests compare.
func ReceiveKeys(t testing.TB, url string, want int, timeout time.Duration) []string {
	t.Helper()
	var keys []string
	for _, m := range Receive(t, url, want, timeout) {
		keys = append(keys, aws.ToString(m.MessageAttributes["outflow.key"].StringValue))
	}
	return keys
}
