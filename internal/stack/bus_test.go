package stack_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// busDLQ is the logical name of the queue a bus's DeadLetterConfig names,
// "" for a bus without one.
func busDLQ(b stack.EventBus) string {
	if b.DeadLetterConfig == nil {
		return ""
	}
	return logical(b.DeadLetterConfig.Arn)
}

// TestTemplate_EncryptedBusKeepsEventsItCannotEncrypt: with KmsKeyArn the
// example bus encrypts its events under the customer key. EventBridge
// accepts a PutEvents entry first (the dispatcher then settles the row
// done) and uses the key while it processes the event on the bus; an
// encryption error there (the key disabled, or its policy missing
// events.amazonaws.com, which docs/stack.md leaves to the operator) is
// non-retriable, and the event goes to the bus's dead-letter queue, or
// nowhere without one (EventBridge User Guide, "Using dead-letter queues
// to capture encrypted event errors": "we strongly recommend specifying a
// DLQ"). A row settled done whose event was then dropped is lost, against
// "every row delivered at least once or dead-lettered". So an encrypted
// bus needs a DeadLetterConfig naming a queue of the stack, and an alarm
// on that queue, or the loss is silent. Without a key there is no such
// error, and the stack has neither.
func TestTemplate_EncryptedBusKeepsEventsItCannotEncrypt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		key  string
	}{
		{"with KmsKeyArn", testKey},
		{"without KmsKeyArn", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			overrides := map[string]string{"KmsKeyArn": tc.key}
			for which, tpl := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
				buses, err := tpl.EventBuses()
				require.NoError(t, err, which)
				require.NotEmpty(t, buses, which)
				for name, bus := range buses {
					require.Equal(t, tc.key, bus.KmsKeyIdentifier, "%s %s", which, name)
					if tc.key == "" {
						require.Nil(t, bus.DeadLetterConfig, "%s %s: an AWS owned key cannot fail, no queue to watch", which, name)
						continue
					}
					require.NotNil(t, bus.DeadLetterConfig, "%s %s: encrypted under a customer key without a dead-letter queue, events EventBridge cannot encrypt after PutEvents accepted them are dropped", which, name)
					queue := busDLQ(bus)
					require.Equal(t, "${"+queue+".Arn}", bus.DeadLetterConfig.Arn, "%s %s: DeadLetterConfig.Arn is a queue of the stack", which, name)
					require.Equal(t, "AWS::SQS::Queue", tpl.Resources[queue].Type, "%s %s", which, name)
					var watchers []string
					for _, a := range tpl.OfType("AWS::CloudWatch::Alarm") {
						for _, m := range alarm(t, tpl, a).watched() {
							if m.Namespace == "AWS/SQS" && len(m.Dimensions) == 1 && m.Dimensions[0] == (struct{ Name, Value string }{"QueueName", "${" + queue + ".QueueName}"}) {
								watchers = append(watchers, a)
							}
						}
					}
					require.Len(t, watchers, 1, "%s %s: an alarm watches the bus's dead-letter queue %s", which, name, queue)
					a := alarm(t, tpl, watchers[0])
					// Every event there is one whose row is done: one is
					// enough, and it stays up until the queue is drained.
					require.Equal(t, "ApproximateNumberOfMessagesVisible", a.MetricName, watchers[0])
					require.Equal(t, "Maximum", a.Statistic, watchers[0])
					require.Equal(t, "GreaterThanThreshold", a.ComparisonOperator, watchers[0])
					require.Zero(t, a.Threshold, watchers[0])
					require.Equal(t, 1, a.EvaluationPeriods, watchers[0])
					// SQS stops publishing a queue's metrics 6 hours after
					// its last API call, messages or not, and nothing
					// polls this one: no data must not turn it OK.
					require.Equal(t, "ignore", a.TreatMissingData, watchers[0])
				}
				for _, name := range tpl.OfType("AWS::SQS::QueuePolicy") {
					require.NotEmpty(t, tc.key, "%s %s: a queue policy only for the bus's dead-letter queue", which, name)
				}
			}
		})
	}
}

// TestTemplate_BusDeadLetterQueueDoesNotNeedTheKey: the queue receives
// exactly the events the customer key failed for, so it must not depend on
// that key (SQS would refuse them too while the key is disabled). It is
// still encrypted at rest (SSE-SQS), keeps its messages as long as SQS
// allows, and forwards them nowhere.
func TestTemplate_BusDeadLetterQueueDoesNotNeedTheKey(t *testing.T) {
	t.Parallel()
	overrides := map[string]string{"KmsKeyArn": testKey}
	for which, tpl := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
		buses, err := tpl.EventBuses()
		require.NoError(t, err, which)
		queues, err := tpl.Queues()
		require.NoError(t, err, which)
		for name, bus := range buses {
			q, ok := queues[busDLQ(bus)]
			require.True(t, ok, "%s %s: its dead-letter queue is a queue of the stack", which, name)
			require.Empty(t, q.KmsMasterKeyId, "%s %s: the queue for the key's failures does not use the key", which, name)
			require.True(t, q.SqsManagedSseEnabled, "%s %s: encrypted at rest all the same", which, name)
			require.False(t, q.FifoQueue, "%s %s: a bus's dead-letter queue is a standard queue", which, name)
			require.Equal(t, 1209600, q.MessageRetentionPeriod, "%s %s: 14 days to fix the key and re-drive", which, name)
			require.Nil(t, q.RedrivePolicy, "%s %s", which, name)
		}
	}
}

// queuePolicy is an AWS::SQS::QueuePolicy's properties, resolved.
type queuePolicy struct {
	Queues         []string
	PolicyDocument struct {
		Statement []struct {
			Effect    string
			Principal map[string]any
			Action    any
			Resource  any
			Condition map[string]map[string]any
		}
	}
}

// TestTemplate_OnlyTheBusMaySendToItsDeadLetterQueue: EventBridge sends to
// the bus's dead-letter queue as its service principal, which the queue's
// policy must allow; least privilege allows it SendMessage alone, and
// only on behalf of this bus (aws:SourceArn), so no other bus or rule in
// any account can fill the queue through the same principal.
func TestTemplate_OnlyTheBusMaySendToItsDeadLetterQueue(t *testing.T) {
	t.Parallel()
	overrides := map[string]string{"KmsKeyArn": testKey}
	for which, tpl := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
		buses, err := tpl.EventBuses()
		require.NoError(t, err, which)
		policies := tpl.OfType("AWS::SQS::QueuePolicy")
		require.Len(t, policies, len(buses), "%s: one queue policy per bus's dead-letter queue", which)
		for name, bus := range buses {
			queue := busDLQ(bus)
			var found []queuePolicy
			for _, p := range policies {
				var qp queuePolicy
				resourceOf(t, tpl, p, "AWS::SQS::QueuePolicy", &qp)
				if len(qp.Queues) == 1 && qp.Queues[0] == "${"+queue+"}" {
					found = append(found, qp)
				}
			}
			require.Len(t, found, 1, "%s %s: one policy on %s, on it alone", which, name, queue)
			stmts := found[0].PolicyDocument.Statement
			require.Len(t, stmts, 1, "%s %s", which, name)
			s := stmts[0]
			require.Equal(t, "Allow", s.Effect, "%s %s", which, name)
			require.Equal(t, map[string]any{"Service": "events.amazonaws.com"}, s.Principal, "%s %s", which, name)
			require.Equal(t, "sqs:SendMessage", fmt.Sprint(s.Action), "%s %s: SendMessage and nothing else", which, name)
			require.Equal(t, "${"+queue+".Arn}", fmt.Sprint(s.Resource), "%s %s", which, name)
			require.Equal(t, map[string]map[string]any{"ArnEquals": {"aws:SourceArn": "${" + name + ".Arn}"}}, s.Condition,
				"%s %s: only this bus's events", which, name)
		}
	}
}

// TestTemplate_BusDeadLetterAlarmNotifiesAndShows: the bus's dead-letter
// alarm is one of the stack's alarms like the others: it notifies
// AlarmTopicArn and exists exactly when the queue it watches does.
func TestTemplate_BusDeadLetterAlarmNotifiesAndShows(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", testKey} {
		tpl := load(t, map[string]string{"KmsKeyArn": key, "AlarmTopicArn": deployParameters["AlarmTopicArn"]})
		_, present := tpl.Resources["DomainBusDeadLettersAlarm"]
		require.Equal(t, key != "", present, "key %q", key)
		_, queue := tpl.Resources["DomainBusDLQ"]
		require.Equal(t, key != "", queue, "key %q", key)
		_, output := tpl.Outputs["DomainBusDLQUrl"]
		require.Equal(t, key != "", output, "key %q: the output names the queue to re-drive from", key)
		if !present {
			continue
		}
		var a struct{ AlarmActions []string }
		resourceOf(t, tpl, "DomainBusDeadLettersAlarm", "AWS::CloudWatch::Alarm", &a)
		require.Equal(t, []string{deployParameters["AlarmTopicArn"]}, a.AlarmActions)
	}
}
