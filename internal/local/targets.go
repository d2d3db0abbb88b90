package local

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/outflowhq/outflow/internal/stack"
)

// provisionTargets creates the template's SNS topics and EventBridge
// buses and records the values their Ref and GetAtt give, as
// CloudFormation does: a topic's Ref is its ARN, a bus's Ref its name.
func provisionTargets(ctx context.Context, tpl *stack.Template, c Clients, prefix string, st *Stack) error {
	topics, err := tpl.Topics()
	if err != nil {
		return err
	}
	for name, tp := range topics {
		topicName := prefix + "-" + strings.ToLower(name)
		attrs := map[string]string{}
		if tp.FifoTopic {
			topicName += ".fifo"
			attrs["FifoTopic"] = "true"
		}
		if tp.KmsMasterKeyId != "" {
			attrs["KmsMasterKeyId"] = tp.KmsMasterKeyId
		}
		out, err := c.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(topicName), Attributes: attrs})
		if err != nil {
			return fmt.Errorf("topic %s: %w", name, err)
		}
		arn := aws.ToString(out.TopicArn)
		st.TopicARNs[name] = arn
		st.Values[name] = arn
		st.Values[name+".TopicArn"] = arn
		st.Values[name+".TopicName"] = topicName
	}
	buses, err := tpl.EventBuses()
	if err != nil {
		return err
	}
	for name := range buses {
		// The template's name is stack-scoped; here the prefix scopes it.
		busName := prefix + "-" + strings.ToLower(name)
		out, err := c.EventBridge.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(busName)})
		if err != nil {
			return fmt.Errorf("event bus %s: %w", name, err)
		}
		arn := aws.ToString(out.EventBusArn)
		st.BusARNs[name] = arn
		st.Values[name] = busName
		st.Values[name+".Arn"] = arn
		st.Values[name+".Name"] = busName
	}
	return nil
}
