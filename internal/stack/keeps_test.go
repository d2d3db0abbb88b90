package stack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// The tests here hold the stack to what it promises to keep (issue 24):
// the bus's dead letters outlive the stack and the key, a queue-depth
// alarm does not clear while messages wait, the functions start with the
// key grant attached, the table is protected from deletion, and alarms go
// only to a topic that can receive them.

// rawResources are the resources of the SAM translation, unresolved: the
// conditional ones with their Condition, and the attributes (DependsOn,
// DeletionPolicy, UpdateReplacePolicy) as CloudFormation reads them.
func rawResources(t *testing.T) map[string]struct {
	Type                string
	Condition           string
	DependsOn           any
	DeletionPolicy      string
	UpdateReplacePolicy string
	Properties          map[string]any
} {
	t.Helper()
	var doc struct {
		Resources map[string]struct {
			Type                string
			Condition           string
			DependsOn           any
			DeletionPolicy      string
			UpdateReplacePolicy string
			Properties          map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(translatedRaw(t), &doc))
	return doc.Resources
}

func TestTemplate_BusDeadLettersOutliveTheStackAndTheKey(t *testing.T) {
	t.Parallel()
	res := rawResources(t)["DomainBusDLQ"]
	// The example bus under a customer key: both ExampleTargets and
	// KmsKeyArn.
	require.Equal(t, "ExampleBusUnderKey", res.Condition)
	// Deleting the stack, clearing KmsKeyArn or ExampleTargets (either
	// removes the queue from the template) or a replacement must not take
	// the only copy of the events the key failed for.
	require.Equal(t, "Retain", res.DeletionPolicy)
	require.Equal(t, "Retain", res.UpdateReplacePolicy)
	oneLine := strings.Join(strings.Fields(doc(t, stackDoc)), " ")
	require.Contains(t, oneLine, "Drain it (re-drive its events) before clearing `KmsKeyArn`")
	require.Contains(t, docRow(t, doc(t, configurationDoc), "KmsKeyArn"), "Drain `DomainBusDLQ` before clearing it")
}

// TestTemplate_QueueDepthAlarmsKeepTheirStateWithoutData: SQS stops
// publishing a queue's metrics once no API call has touched it for 6
// hours, whether or not messages wait in it. An alarm on a queue's depth
// that takes missing data as OK (notBreaching) clears while they wait;
// every such alarm, with and without KmsKeyArn, must ignore missing data.
func TestTemplate_QueueDepthAlarmsKeepTheirStateWithoutData(t *testing.T) {
	t.Parallel()
	depth := 0
	for _, key := range []string{"", testKey} {
		tpl := load(t, map[string]string{"KmsKeyArn": key})
		for _, name := range tpl.OfType("AWS::CloudWatch::Alarm") {
			a := alarm(t, tpl, name)
			for _, m := range a.watched() {
				if m.Namespace == "AWS/SQS" && strings.HasPrefix(m.MetricName, "ApproximateNumberOfMessages") {
					depth++
					require.Equal(t, "ignore", a.TreatMissingData, "%s watches a queue's depth", name)
				}
			}
		}
	}
	require.Equal(t, 1, depth, "DomainBusDeadLettersAlarm, with KmsKeyArn only")
}

// dependsOn lists a raw DependsOn (a name or a list of names).
func dependsOn(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = fmt.Sprint(e)
		}
		return out
	}
	return nil
}

// TestTemplate_FunctionsStartWithTheKeyGrantAttached: KmsKeyPolicy is
// attached to the roles apart from them, so the functions (and so their
// stream mapping and schedule, which name them) must wait for it, or their
// first invocations fail on the table's key. They depend on
// KmsKeyPolicyAttached, an unconditional handle whose Metadata refers to
// the policy only under HasKmsKey: CloudFormation refuses a DependsOn on a
// resource whose condition is false (cfn-lint E3005).
func TestTemplate_FunctionsStartWithTheKeyGrantAttached(t *testing.T) {
	t.Parallel()
	raw := rawResources(t)
	for name, r := range raw {
		for _, dep := range dependsOn(r.DependsOn) {
			target, ok := raw[dep]
			require.True(t, ok, "%s depends on %s, which is not in the translation", name, dep)
			require.True(t, target.Condition == "" || target.Condition == r.Condition,
				"%s (condition %q) depends on %s (condition %q): an error whenever the latter is false", name, r.Condition, dep, target.Condition)
		}
	}
	handle := raw["KmsKeyPolicyAttached"]
	require.Equal(t, "AWS::CloudFormation::WaitConditionHandle", handle.Type)
	require.Empty(t, handle.Condition, "the handle exists whatever KmsKeyArn")
	for _, fn := range functions {
		require.Contains(t, dependsOn(raw[fn].DependsOn), "KmsKeyPolicyAttached", "%s waits for the key grant", fn)
	}
	for _, tc := range []struct {
		key    string
		policy any
	}{
		{testKey, "${KmsKeyPolicy}"},
		{"", nil},
	} {
		for which, tpl := range map[string]*stack.Template{"template": load(t, map[string]string{"KmsKeyArn": tc.key}), "translation": translated(t, map[string]string{"KmsKeyArn": tc.key})} {
			h, ok := tpl.Resources["KmsKeyPolicyAttached"]
			require.True(t, ok, which)
			require.Equal(t, tc.policy, h.Metadata["Policy"], "%s, KmsKeyArn %q: the handle refers to the policy exactly when it exists", which, tc.key)
		}
	}
	// What starts the functions names them, so it comes after them too.
	var esm struct{ FunctionName string }
	resourceOf(t, translated(t, nil), "WakeFunctionStream", "AWS::Lambda::EventSourceMapping", &esm)
	require.Equal(t, "${WakeFunction}", esm.FunctionName)
	var sched struct{ Target struct{ Arn string } }
	resourceOf(t, translated(t, nil), "SweepFunctionSchedule", "AWS::Scheduler::Schedule", &sched)
	require.Equal(t, "${SweepFunction.Arn}", sched.Target.Arn)
}

// TestTemplate_SweepInvokePolicyCannotBeWaitedFor documents why nothing
// waits for SweepInvokePolicy: it names the sweep's own ARN, so the sweep
// cannot depend on it (a cycle), and the schedule SAM generates takes no
// DependsOn. A scheduled sweep that runs before it is attached sweeps the
// partitions it could not start itself (internal/handler).
func TestTemplate_SweepInvokePolicyCannotBeWaitedFor(t *testing.T) {
	t.Parallel()
	tr := translated(t, map[string]string{"SweepPartitions": "2"})
	var p struct {
		PolicyDocument struct{ Statement []map[string]any }
	}
	resourceOf(t, tr, "SweepInvokePolicy", "AWS::IAM::Policy", &p)
	require.Len(t, p.PolicyDocument.Statement, 1)
	require.Equal(t, []string{"${SweepFunction.Arn}"}, list(p.PolicyDocument.Statement[0]["Resource"]))
	for name, r := range rawResources(t) {
		require.NotContains(t, dependsOn(r.DependsOn), "SweepInvokePolicy", name)
	}
}

func TestTemplate_TableIsProtectedFromDeletionUnlessTurnedOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"", true}, // the default
		{"true", true},
		{"false", false},
	} {
		overrides := map[string]string{}
		if tc.value != "" {
			overrides["TableDeletionProtection"] = tc.value
		}
		for which, tpl := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
			tb, err := tpl.Table("OutboxTable")
			require.NoError(t, err, which)
			require.Equal(t, tc.want, tb.DeletionProtectionEnabled, "%s, TableDeletionProtection %q", which, tc.value)
		}
	}
	_, err := stack.Load(templatePath, map[string]string{"TableDeletionProtection": "yes"})
	require.ErrorContains(t, err, "not one of AllowedValues")
}

// TestTemplate_AlarmTopicArnTakesOnlyATopicThatCanReceiveAlarms: empty, or
// a standard topic's ARN in any partition. A name, another service's ARN
// or a FIFO topic (CloudWatch cannot publish to one) is refused at deploy,
// not at the first alarm. The docs say what the pattern cannot check:
// a topic under alias/aws/sns cannot receive alarms.
func TestTemplate_AlarmTopicArnTakesOnlyATopicThatCanReceiveAlarms(t *testing.T) {
	t.Parallel()
	p := load(t, nil).Parameters["AlarmTopicArn"]
	require.NotEmpty(t, p.AllowedPattern)
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"", true},
		{"arn:aws:sns:us-east-1:123456789012:alarms", true},
		{"arn:aws:sns:eu-west-1:123456789012:ops_Alarms-2", true},
		{"arn:aws-us-gov:sns:us-gov-west-1:123456789012:alarms", true},
		{"arn:aws-cn:sns:cn-north-1:123456789012:alarms", true},
		{"alarms", false},
		{"arn:aws:sns:us-east-1:123456789012:alarms.fifo", false},
		{"arn:aws:sqs:us-east-1:123456789012:alarms", false},
		{"arn:aws:sns:us-east-1:1234:alarms", false},
		{"arn:aws:sns:us-east-1:123456789012:alarms:8f2c1b", false}, // a subscription
		{" arn:aws:sns:us-east-1:123456789012:alarms", false},
	} {
		err := p.Allows(tc.value)
		if tc.ok {
			require.NoError(t, err, tc.value)
		} else {
			require.Error(t, err, tc.value)
		}
	}
	require.NoError(t, p.Allows(deployParameters["AlarmTopicArn"]), "the deploy test's topic")
	row := docRow(t, doc(t, configurationDoc), "AlarmTopicArn")
	require.Contains(t, row, "`alias/aws/sns`")
	require.Contains(t, row, "`cloudwatch.amazonaws.com`")
	require.Contains(t, p.Description, "alias/aws/sns")
}

// TestDocs_DueIndexProjectionIsExplainedWhereTheParametersAre: the
// parameter's row says what the old value is for; the upgrade itself is tested in
// upgrade_test.go.
func TestDocs_DueIndexProjectionIsExplainedWhereTheParametersAre(t *testing.T) {
	t.Parallel()
	row := docRow(t, doc(t, configurationDoc), "DueIndexProjection")
	require.Contains(t, row, "`created_at,queue,prev,seq`")
	require.Contains(t, row, "`created_at,queue` keeps the index of a stack deployed before ordered groups")
	p := load(t, nil).Parameters["DueIndexProjection"]
	require.Equal(t, "created_at,queue,prev,seq", p.Default)
	require.ElementsMatch(t, []any{"created_at,queue,prev,seq", "created_at,queue"}, p.AllowedValues)
}
