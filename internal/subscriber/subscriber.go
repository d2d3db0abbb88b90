// Package subscriber sets up what a consumer reads a topic or a bus
// through: an SQS queue subscribed to an SNS topic with raw message
// delivery, or an EventBridge rule on a bus whose target is the queue. The
// local demo, the benchmarks and the tests read the new targets this way.
package subscriber

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// QueueARN is the ARN of the queue at url, which subscriptions and rule
// targets name it by.
func QueueARN(ctx context.Context, api *sqs.Client, url string) (string, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("queue arn: %w", err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// Topic subscribes the queue to the topic with raw message delivery, so
// the queue receives each message's body and attributes as a queue route
// would send them.
func Topic(ctx context.Context, api *sns.Client, topicARN, queueARN string) error {
	_, err := api.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(queueARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"}, ReturnSubscriptionArn: true,
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// TargetID is the id of the queue among a Rule's targets.
const TargetID = "queue"

// Rule puts a rule on the bus (its name) that sends every event whose
// source is one of sources to the queue, as the event's JSON in the
// message body, and returns the rule's ARN.
func Rule(ctx context.Context, api *eventbridge.Client, bus, rule, queueARN string, sources ...string) (string, error) {
	pattern, err := json.Marshal(map[string][]string{"source": sources})
	if err != nil {
		return "", err
	}
	r, err := api.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus), EventPattern: aws.String(string(pattern))})
	if err != nil {
		return "", fmt.Errorf("put rule: %w", err)
	}
	out, err := api.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule: aws.String(rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String(TargetID), Arn: aws.String(queueARN)}},
	})
	if err != nil {
		return "", fmt.Errorf("put targets: %w", err)
	}
	if out.FailedEntryCount > 0 {
		return "", fmt.Errorf("rule target refused: %s", aws.ToString(out.FailedEntries[0].ErrorMessage))
	}
	return aws.ToString(r.RuleArn), nil
}
