package awstest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SNS is an SNS client for the test endpoint.
func SNS(t testing.TB) *sns.Client { return sns.NewFromConfig(TestConfig(t)) }

// EventBridge is an EventBridge client for the test endpoint.
func EventBridge(t testing.TB) *eventbridge.Client { return eventbridge.NewFromConfig(TestConfig(t)) }

// NewTopic creates an SNS topic with a unique name (FIFO if fifo), deleted
// after the test, and returns its ARN.
func NewTopic(t testing.TB, fifo bool) string {
	t.Helper()
	client := SNS(t)
	name := UniqueName("outflow-test")
	attrs := map[string]string{}
	if fifo {
		name += ".fifo"
		attrs["FifoTopic"] = "true"
	}
	out, err := client.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.TopicArn)
	t.Cleanup(func() {
		_, _ = client.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(arn)})
	})
	return arn
}

// Subscribe subscribes a new queue to a topic with raw message delivery,
// so each message arrives with its body and attributes as published, and
// returns the queue's URL. A FIFO topic gets a FIFO queue.
func Subscribe(t testing.TB, topicARN string, fifo bool) string {
	t.Helper()
	url := NewQueue(t, fifo)
	_, err := SNS(t).Subscribe(context.Background(), &sns.SubscribeInput{
		TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(QueueARN(t, url)),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// QueueARN is the ARN of the queue at url.
func QueueARN(t testing.TB, url string) string {
	t.Helper()
	out, err := SQS(t).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
}

// NewBus creates an EventBridge bus with a unique name, deleted after the
// test, and returns its name and ARN.
func NewBus(t testing.TB) (name, arn string) {
	t.Helper()
	client := EventBridge(t)
	name = UniqueName("outflow-test")
	out, err := client.CreateEventBus(context.Background(), &eventbridge.CreateEventBusInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteEventBus(context.Background(), &eventbridge.DeleteEventBusInput{Name: aws.String(name)})
	})
	return name, aws.ToString(out.EventBusArn)
}

// RouteEvents puts a rule on a bus that sends every event whose source
// is one of sources to a new queue, and returns the queue's URL: each
// message's body is the event, as EventBridge delivers it.
func RouteEvents(t testing.TB, bus string, sources ...string) string {
	t.Helper()
	client := EventBridge(t)
	ctx := context.Background()
	url := NewQueue(t, false)
	pattern, err := json.Marshal(map[string][]string{"source": sources})
	if err != nil {
		t.Fatal(err)
	}
	rule := UniqueName("outflow-test")
	if _, err := client.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus), EventPattern: aws.String(string(pattern))}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule: aws.String(rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(QueueARN(t, url))}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus), Ids: []string{"queue"}})
		_, _ = client.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus)})
	})
	return url
}
