package awstest

import (
	"context"
	"encoding/json"
	"strings"
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

// NewTopic creates a topic with a unique name and a new queue subscribed
// to it with raw message delivery, so the queue receives each message's
// body and attributes as a queue route would send them. Both are deleted
// after the test. It returns the topic ARN and the queue URL.
func NewTopic(t testing.TB, fifo bool) (topicARN, queueURL string) {
	t.Helper()
	ctx := context.Background()
	client := SNS(t)
	name := UniqueName("outflow-test")
	attrs := map[string]string{}
	if fifo {
		name += ".fifo"
		attrs["FifoTopic"] = "true"
	}
	out, err := client.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	topicARN = aws.ToString(out.TopicArn)
	t.Cleanup(func() {
		_, _ = client.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(topicARN)})
	})
	queueURL = NewQueue(t, fifo)
	if _, err := client.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(queueARN(t, queueURL)),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	}); err != nil {
		t.Fatal(err)
	}
	return topicARN, queueURL
}

// NewBus creates an event bus with a unique name and a rule on it that
// sends every event to a new queue, as a JSON event in the message body.
// All are deleted after the test. It returns the bus ARN and the queue
// URL.
func NewBus(t testing.TB) (busARN, queueURL string) {
	t.Helper()
	ctx := context.Background()
	client := EventBridge(t)
	name := UniqueName("outflow-test")
	out, err := client.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	busARN = aws.ToString(out.EventBusArn)
	queueURL = NewQueue(t, false)
	// Every event on the bus: a rule needs a pattern, and every event has
	// an account.
	pattern, err := json.Marshal(map[string][]string{"account": {accountOf(busARN)}})
	if err != nil {
		t.Fatal(err)
	}
	rule := name + "-all"
	if _, err := client.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(name), EventPattern: aws.String(string(pattern))}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(name),
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(queueARN(t, queueURL))}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = client.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(name), Ids: []string{"queue"}})
		_, _ = client.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(rule), EventBusName: aws.String(name)})
		_, _ = client.DeleteEventBus(ctx, &eventbridge.DeleteEventBusInput{Name: aws.String(name)})
	})
	return busARN, queueURL
}

// queueARN reads a queue's ARN, which subscriptions and rule targets name
// it by.
func queueARN(t testing.TB, url string) string {
	t.Helper()
	out, err := SQS(t).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
}

// accountOf is the account field of an ARN.
func accountOf(arn string) string {
	if parts := strings.Split(arn, ":"); len(parts) > 4 {
		return parts[4]
	}
	return ""
}
