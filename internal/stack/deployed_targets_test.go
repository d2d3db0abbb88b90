package stack_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// checkTargets reads the example topic and bus back: the topic exists
// under the key the template gives it, the bus under the stack-scoped name
// the template gives it.
func (d *deployment) checkTargets(t *testing.T) {
	ctx := context.Background()
	topics, err := d.tpl.Topics()
	require.NoError(t, err)
	require.NotEmpty(t, topics, "the stack creates an example topic")
	snsc := sns.NewFromConfig(d.cfg)
	for name, tp := range topics {
		arn := d.ids[name]
		require.True(t, strings.HasPrefix(arn, "arn:aws:sns:"), "%s: Ref of a topic is its ARN, got %q", name, arn)
		out, err := snsc.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(arn)})
		require.NoError(t, err, name)
		require.Equal(t, arn, out.Attributes["TopicArn"], name)
		require.Equal(t, tp.KmsMasterKeyId, out.Attributes["KmsMasterKeyId"], "%s: encrypted as the template says", name)
		require.Equal(t, tp.FifoTopic, strings.HasSuffix(arn, ".fifo"), name)
	}

	buses, err := d.tpl.EventBuses()
	require.NoError(t, err)
	require.NotEmpty(t, buses, "the stack creates an example event bus")
	ebc := eventbridge.NewFromConfig(d.cfg)
	for name, b := range buses {
		// The translation was resolved under stack.StackName; the
		// deployment's own name takes its place.
		require.True(t, strings.HasPrefix(b.Name, stack.StackName+"-"), "%s: %s is stack-scoped", name, b.Name)
		want := d.name + strings.TrimPrefix(b.Name, stack.StackName)
		out, err := ebc.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(d.ids[name])})
		require.NoError(t, err, name)
		require.Equal(t, want, aws.ToString(out.Name), name)
		require.Equal(t, d.values[name+".Arn"], aws.ToString(out.Arn), name)
		require.True(t, strings.HasSuffix(aws.ToString(out.Arn), ":event-bus/"+want), name)
	}
}

// checkSendGrants reads both roles' policies back through IAM: each holds
// sqs:SendMessage on exactly the routed queues, sns:Publish on exactly the
// deployed topic and events:PutEvents on exactly the deployed bus, the
// ARNs the deployment made.
func (d *deployment) checkSendGrants(t *testing.T) {
	var want []grant
	for _, q := range d.tpl.OfType("AWS::SQS::Queue") {
		if !strings.HasSuffix(q, "DLQ") {
			want = append(want, grant{"sqs:SendMessage", d.values[q+".Arn"]})
		}
	}
	for _, tp := range d.tpl.OfType("AWS::SNS::Topic") {
		want = append(want, grant{"sns:Publish", d.ids[tp]})
	}
	for _, b := range d.tpl.OfType("AWS::Events::EventBus") {
		want = append(want, grant{"events:PutEvents", d.values[b+".Arn"]})
	}
	require.Len(t, want, 4, "two queues, a topic and a bus")
	for _, g := range want {
		require.NotEmpty(t, g.resource, "%s: the deployment has the ARN", g.action)
	}
	for _, role := range []string{"SweepRole", "WakeRole"} {
		var got []grant
		for _, s := range d.roleStatements(t, role) {
			for _, a := range s.Action {
				if a == "*" || slices.Contains([]string{"sqs:SendMessage", "sns:Publish", "events:PutEvents"}, a) || strings.HasSuffix(a, ":*") {
					for _, r := range s.Resource {
						got = append(got, grant{a, r})
					}
				}
			}
		}
		require.ElementsMatch(t, want, got, role)
	}
}
