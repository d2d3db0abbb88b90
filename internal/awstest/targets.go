package awstest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/outflowhq/outflow/internal/subscriber"
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
	if err := subscriber.Topic(context.Background(), SNS(t), topicARN, QueueARN(t, url)); err != nil {
		t.Fatal(err)
	}
	return url
}

// QueueARN is the ARN of the queue at url.
func QueueARN(t testing.TB, url string) string {
	t.Helper()
	arn, err := subscriber.QueueARN(context.Background(), SQS(t), url)
	if err != nil {
		t.Fatal(err)
	}
	return arn
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
	rule := UniqueName("outflow-test")
	if _, err := subscriber.Rule(ctx, client, bus, rule, QueueARN(t, url), sources...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus), Ids: []string{subscriber.TargetID}})
		_, _ = client.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus)})
	})
	return url
}
