package stack_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTemplate_EncryptedBusKeepsEventsItCannotEncrypt: with KmsKeyArn the
// example bus encrypts its events under the customer key. EventBridge
// accepts a PutEvents entry first (the dispatcher then settles the row
// done) and uses the key while it processes the event on the bus; an
// encryption error there (the key disabled, or its policy missing
// events.amazonaws.com, which README "Deploy" leaves to the operator) is
// non-retriable, and the event goes to the bus's dead-letter queue, or
// nowhere without one (EventBridge User Guide, "Using dead-letter queues
// to capture encrypted event errors": "we strongly recommend specifying a
// DLQ"). A row settled done whose event was then dropped is lost, against
// "every row delivered at least once or dead-lettered". So an encrypted
// bus needs a DeadLetterConfig naming a queue of the stack, and an alarm
// on that queue, or the loss is silent.
func TestTemplate_EncryptedBusKeepsEventsItCannotEncrypt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		key  string
	}{
		{"with KmsKeyArn", testKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tpl := load(t, map[string]string{"KmsKeyArn": tc.key})
			buses := tpl.OfType("AWS::Events::EventBus")
			require.NotEmpty(t, buses)
			for _, name := range buses {
				var bus struct {
					KmsKeyIdentifier string
					DeadLetterConfig *struct{ Arn string }
				}
				require.NoError(t, tpl.Resources[name].Decode(&bus), name)
				require.Equal(t, tc.key, bus.KmsKeyIdentifier, name)
				require.NotNil(t, bus.DeadLetterConfig, "%s: encrypted under a customer key without a dead-letter queue, events EventBridge cannot encrypt after PutEvents accepted them are dropped", name)
				queue, ok := strings.CutSuffix(strings.TrimSuffix(strings.TrimPrefix(bus.DeadLetterConfig.Arn, "${"), "}"), ".Arn")
				require.True(t, ok, "%s: DeadLetterConfig.Arn %q is a queue of the stack", name, bus.DeadLetterConfig.Arn)
				require.Equal(t, "AWS::SQS::Queue", tpl.Resources[queue].Type, name)
				watched := false
				for _, a := range tpl.OfType("AWS::CloudWatch::Alarm") {
					for _, m := range alarm(t, tpl, a).watched() {
						for _, d := range m.Dimensions {
							watched = watched || (m.Namespace == "AWS/SQS" && d.Name == "QueueName" && strings.Contains(d.Value, queue))
						}
					}
				}
				require.True(t, watched, "%s: an alarm watches the bus's dead-letter queue %s", name, queue)
			}
		})
	}
}
