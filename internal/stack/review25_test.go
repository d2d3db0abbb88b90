package stack_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// TestReview25_AListWithAnEmptyElementGrantsNoEmptyResource: a
// CommaDelimitedList element may be empty (so an empty list, [""], is
// allowed), and so a stray comma in QueueArns, TopicArns, BusArns or
// TargetKmsKeyArns passes the parameter's pattern. Has*Arns is then true
// (the Join is not empty) and the statement's Resource carries "" next to
// the ARNs, which IAM refuses at deploy (MalformedPolicyDocument) instead
// of the parameter check naming the parameter. Either the parameter must
// refuse the value, or the policy must hold no empty resource.
func TestReview25_AListWithAnEmptyElementGrantsNoEmptyResource(t *testing.T) {
	t.Parallel()
	params := load(t, nil).Parameters
	for _, tc := range []struct{ param, value, policy string }{
		{"QueueArns", ownQueue + ",", "SendMessagesPolicy"},
		{"QueueArns", ownQueue + ",," + ownFifoQueue, "SendMessagesPolicy"},
		{"TopicArns", "," + ownTopic, "PublishPolicy"},
		{"BusArns", ownBus + ",", "PutEventsPolicy"},
		{"TargetKmsKeyArns", ownKey + ",", "TargetKmsKeysPolicy"},
	} {
		if params[tc.param].Allows(tc.value) != nil {
			continue // refused at the parameter check: fine
		}
		for _, examples := range []string{"false", "true"} {
			params := map[string]string{"ExampleTargets": examples, "Routes": ownRoutes, tc.param: tc.value}
			if _, err := stack.Load(templatePath, params); err != nil {
				require.ErrorContains(t, err, tc.param+" has an empty element", "refused by a rule, naming the parameter")
				continue
			}
			tpl := load(t, params)
			var p struct {
				PolicyDocument struct{ Statement []struct{ Resource []string } }
			}
			resourceOf(t, tpl, tc.policy, "AWS::IAM::Policy", &p)
			for _, s := range p.PolicyDocument.Statement {
				for _, r := range s.Resource {
					require.NotEmpty(t, r, "%s=%q (examples %s): %s grants an empty resource %q", tc.param, tc.value, examples, tc.policy, s.Resource)
				}
			}
		}
	}
}
