package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/eventfilter"
	"github.com/outflowhq/outflow/internal/stack"
)

const templatePath = "../../template.yaml"

var functions = []string{"SweepFunction", "WakeFunction"}

// load resolves template.yaml with overrides. ExampleTargets is "true"
// unless overrides set it, as outflow local resolves it: most tests check
// the example targets and the grants on them. The tests of a deploy to
// your own targets (own_targets_test.go) set it "false".
func load(t *testing.T, overrides map[string]string) *stack.Template {
	t.Helper()
	tpl, err := stack.Load(templatePath, withExamples(overrides))
	require.NoError(t, err)
	return tpl
}

// withExamples is overrides with ExampleTargets "true" unless they set it.
func withExamples(overrides map[string]string) map[string]string {
	out := map[string]string{"ExampleTargets": "true"}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}

// templateText is template.yaml as written.
func templateText(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	return raw
}

func function(t *testing.T, tpl *stack.Template, name string) stack.Function {
	t.Helper()
	f, err := tpl.Function(name)
	require.NoError(t, err)
	return f
}

func TestTemplate_FunctionsAreGoOnGravitonWithJSONLogs(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for _, name := range functions {
		f := function(t, tpl, name)
		require.Equal(t, "provided.al2023", f.Runtime, name)
		require.Equal(t, []string{"arm64"}, f.Architectures, name)
		require.Equal(t, "bootstrap", f.Handler, name)
		require.Equal(t, "JSON", f.LoggingConfig.LogFormat, name)
		require.DirExists(t, "../../"+f.CodeUri, name)
	}
}

// TestTemplate_PlainSamBuildMakesStaticBootstraps checks what `sam build`
// runs for each function: the Makefile's build-<LogicalId> target, which
// must build the function's own package for Lambda's OS and architecture
// with cgo off (on an arm64 host with a C compiler cgo would otherwise stay
// on and link the host's glibc).
func TestTemplate_PlainSamBuildMakesStaticBootstraps(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for _, name := range functions {
		f := function(t, tpl, name)
		meta := tpl.Resources[name].Metadata
		require.Equal(t, "makefile", meta["BuildMethod"], name)
		require.Equal(t, ".", meta["ContextPath"], "%s: the repository's Makefile", name)
		out, err := exec.Command("make", "-s", "-n", "-C", "../..", "build-"+name, "ARTIFACTS_DIR=/artifacts").CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
		cmd := string(out)
		for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + f.Architectures[0], " build ", "-o \"/artifacts/bootstrap\"", " ./" + f.CodeUri} {
			require.Contains(t, cmd, want, name)
		}
	}
}

func TestTemplate_WakeFilterMatchesExactlyPendingInserts(t *testing.T) {
	t.Parallel()
	var ev stack.StreamEvent
	require.NoError(t, function(t, load(t, nil), "WakeFunction").Event("DynamoDB", &ev))
	require.Len(t, ev.FilterCriteria.Filters, 1)
	p, err := eventfilter.Compile(ev.FilterCriteria.Filters[0].Pattern)
	require.NoError(t, err)

	record := func(name, status string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(fmt.Sprintf(`{"eventName":%q,"dynamodb":{"NewImage":{"pk":{"S":"k"},"status":{"S":%q}}}}`, name, status)), &m))
		return m
	}
	for _, name := range []string{"INSERT", "MODIFY", "REMOVE"} {
		for _, status := range []string{"pending", "claimed", "failed", "done"} {
			want := name == "INSERT" && status == "pending"
			require.Equal(t, want, p.Match(record(name, status)), "%s %s", name, status)
		}
	}
	require.False(t, p.Match(map[string]any{"eventName": "INSERT", "dynamodb": map[string]any{}}), "no image, no match")
}

func TestTemplate_StreamMappingIsTunedForAnAdvisoryWake(t *testing.T) {
	t.Parallel()
	var ev stack.StreamEvent
	require.NoError(t, function(t, load(t, nil), "WakeFunction").Event("DynamoDB", &ev))
	require.Equal(t, "${OutboxTable.StreamArn}", ev.Stream)
	require.Positive(t, ev.BatchSize)
	require.LessOrEqual(t, ev.MaximumRetryAttempts, 2, "the sweep is the backstop; retries only add duplicates")
	require.LessOrEqual(t, ev.MaximumRecordAgeInSeconds, 300)
	require.Positive(t, ev.ParallelizationFactor)
}

func TestTemplate_FunctionsTimeOutBeforeTheirLease(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for _, name := range functions {
		f := function(t, tpl, name)
		lease, err := time.ParseDuration(f.Environment.Variables["OUTFLOW_LEASE"])
		require.NoError(t, err)
		require.Less(t, time.Duration(f.Timeout)*time.Second, lease, name)
		margin, err := time.ParseDuration(f.Environment.Variables["OUTFLOW_DEADLINE_MARGIN"])
		require.NoError(t, err)
		require.Less(t, margin, time.Duration(f.Timeout)*time.Second, name)
	}
}

func TestTemplate_DispatcherEnabledSwitchesScheduleAndMapping(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{true, false} {
		tpl := load(t, map[string]string{"DispatcherEnabled": fmt.Sprint(enabled)})
		var sched stack.ScheduleEvent
		require.NoError(t, function(t, tpl, "SweepFunction").Event("ScheduleV2", &sched))
		require.Equal(t, map[bool]string{true: "ENABLED", false: "DISABLED"}[enabled], sched.State)
		require.Equal(t, "rate(1 minute)", sched.ScheduleExpression)
		var ev stack.StreamEvent
		require.NoError(t, function(t, tpl, "WakeFunction").Event("DynamoDB", &ev))
		require.NotNil(t, ev.Enabled)
		require.Equal(t, enabled, *ev.Enabled)
	}
}

// statement is an IAM policy statement with Action and Resource as lists.
type statement struct {
	Effect   string
	Action   []string
	Resource []string
}

// statements are each role's policy statements, by role: its inline
// policies' and those of every AWS::IAM::Policy attached to it.
func statements(t *testing.T, tpl *stack.Template) map[string][]statement {
	t.Helper()
	out := map[string][]statement{}
	add := func(role string, raw []map[string]any) {
		for _, r := range raw {
			out[role] = append(out[role], statement{Effect: fmt.Sprint(r["Effect"]), Action: list(r["Action"]), Resource: list(r["Resource"])})
		}
	}
	for _, name := range tpl.OfType("AWS::IAM::Role") {
		var role struct {
			Policies []struct {
				PolicyDocument struct{ Statement []map[string]any }
			}
			ManagedPolicyArns []string
		}
		require.NoError(t, tpl.Resources[name].Decode(&role))
		require.Empty(t, role.ManagedPolicyArns, "%s: managed policies are not least privilege", name)
		for _, p := range role.Policies {
			add(name, p.PolicyDocument.Statement)
		}
	}
	for _, name := range tpl.OfType("AWS::IAM::Policy") {
		var p struct {
			Roles          []string
			PolicyDocument struct{ Statement []map[string]any }
		}
		require.NoError(t, tpl.Resources[name].Decode(&p))
		require.NotEmpty(t, p.Roles, "%s is attached to no role", name)
		for _, ref := range p.Roles {
			role := strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")
			require.Equal(t, "AWS::IAM::Role", tpl.Resources[role].Type, "%s: %s is not a role of this stack", name, ref)
			add(role, p.PolicyDocument.Statement)
		}
	}
	return out
}

func list(v any) []string {
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

// TestTemplate_PoliciesGrantLeastPrivilege checks the roles with and
// without KmsKeyArn: no wildcard, and every resource one of this stack's or
// the customer key given.
func TestTemplate_PoliciesGrantLeastPrivilege(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", testKey} {
		byRole := statements(t, load(t, map[string]string{"KmsKeyArn": key}))
		require.Len(t, byRole, 2)
		for role, stmts := range byRole {
			for _, s := range stmts {
				require.Equal(t, "Allow", s.Effect)
				for _, a := range s.Action {
					require.NotContains(t, a, "*", "%s: wildcard action %s", role, a)
				}
				for _, r := range s.Resource {
					require.NotContains(t, r, "*", "%s: wildcard resource %s", role, r)
					require.True(t, strings.HasPrefix(r, "${") || (key != "" && r == key), "%s: resource %s must name a resource of this stack or the key", role, r)
				}
			}
		}
	}
	tpl := load(t, nil)
	byRole := statements(t, tpl)
	// Every function uses its own role, so SAM adds no policies of its own.
	for _, name := range functions {
		require.True(t, strings.HasPrefix(function(t, tpl, name).Role, "${"), name)
	}
	// The sweep reads only the due index; only the wake reads the stream.
	// The sweep scans the table for the lean backstop alone, the wake
	// nothing (TestTemplate_OnlyTheSweepMayScanTheTableAndOnlyForTheBackstop).
	for _, s := range byRole["SweepRole"] {
		for _, r := range s.Resource {
			require.NotContains(t, r, "StreamArn")
			if strings.Contains(r, "/index/") {
				require.Equal(t, "${OutboxTable.Arn}/index/due", r)
			}
		}
	}
	for _, s := range byRole["WakeRole"] {
		require.NotContains(t, s.Action, "dynamodb:Scan", "the wake reads rows by key and from the stream")
	}
}

func TestTemplate_TableMatchesTheGoSchema(t *testing.T) {
	t.Parallel()
	tb, err := load(t, nil).Table("OutboxTable")
	require.NoError(t, err)
	want := dynamo.Table.CreateTableInput("outbox")
	got := tb.CreateTableInput("outbox")
	require.ElementsMatch(t, want.AttributeDefinitions, got.AttributeDefinitions)
	require.Equal(t, want.KeySchema, got.KeySchema)
	require.ElementsMatch(t, want.GlobalSecondaryIndexes, got.GlobalSecondaryIndexes)
	require.Equal(t, want.StreamSpecification, got.StreamSpecification)
	require.Equal(t, want.SSESpecification, got.SSESpecification)
	require.Equal(t, want.BillingMode, got.BillingMode)
	require.Equal(t, dynamo.Table.TTLAttribute, tb.TimeToLiveSpecification.AttributeName)
	require.True(t, tb.TimeToLiveSpecification.Enabled)
	require.True(t, tb.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled)
}

func TestTemplate_QueuesAreEncryptedWithTheirOwnDLQ(t *testing.T) {
	t.Parallel()
	queues, err := load(t, nil).Queues()
	require.NoError(t, err)
	fifo, standard := 0, 0
	for name, q := range queues {
		require.True(t, q.SqsManagedSseEnabled, name)
		if strings.HasSuffix(name, "DLQ") {
			continue
		}
		require.NotNil(t, q.RedrivePolicy, name)
		dlq := strings.TrimSuffix(strings.TrimPrefix(q.RedrivePolicy.DeadLetterTargetArn, "${"), ".Arn}")
		require.Contains(t, queues, dlq, name)
		require.Equal(t, q.FifoQueue, queues[dlq].FifoQueue, "a FIFO queue needs a FIFO DLQ")
		if q.FifoQueue {
			fifo++
		} else {
			standard++
		}
	}
	require.Positive(t, fifo)
	require.Positive(t, standard)
}

// sweepOnly are the variables only the sweep reads: how many partitions
// the scheduled sweep fans out to, and the schedule's period. The wake's
// environment leaves them out.
var sweepOnly = []string{"OUTFLOW_SWEEP_PARTITIONS", "OUTFLOW_SWEEP_RATE"}

func TestTemplate_EveryVariableTheCodeReadsIsSetFromTheTemplate(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for _, name := range functions {
		vars := function(t, tpl, name).Environment.Variables
		for _, v := range config.Vars {
			if name != "SweepFunction" && slices.Contains(sweepOnly, v.Name) {
				require.NotContains(t, vars, v.Name, "only the sweep reads %s", v.Name)
				continue
			}
			require.Contains(t, vars, v.Name, "%s must set %s", name, v.Name)
		}
		for k := range vars {
			if strings.HasPrefix(k, config.Prefix) {
				require.True(t, hasVar(k), "%s sets %s, which the code does not read", name, k)
			}
		}
		// The template's defaults are the code's defaults.
		env := map[string]string{}
		for k, v := range vars {
			env[k] = v
		}
		env["OUTFLOW_TABLE"] = "outbox"
		env["OUTFLOW_ROUTES"] = "orders=http://localhost/1/orders,events.fifo=http://localhost/1/events.fifo"
		fromTemplate, err := config.Load(func(k string) string { return env[k] })
		require.NoError(t, err, name)
		defaults, err := config.Load(func(k string) string {
			// The function timeout is each function's own and the sweep
			// rate the schedule's, with no code default.
			if k == "OUTFLOW_TABLE" || k == "OUTFLOW_ROUTES" || k == "OUTFLOW_FUNCTION_TIMEOUT" || k == "OUTFLOW_SWEEP_RATE" {
				return env[k]
			}
			return ""
		})
		require.NoError(t, err)
		require.Equal(t, defaults, fromTemplate, name)
	}
}

func hasVar(name string) bool {
	for _, v := range config.Vars {
		if v.Name == name {
			return true
		}
	}
	return false
}

func TestLoad_RejectsUnknownOverride(t *testing.T) {
	t.Parallel()
	_, err := stack.Load(templatePath, map[string]string{"Nope": "1"})
	require.ErrorContains(t, err, `unknown parameter "Nope"`)
}

func TestLoad_RefusesWhatCloudFormationRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, want string }{
		{"Shards", "0", "below MinValue"},
		{"Shards", "four", "not a number"},
		{"LogRetentionDays", "2", "not one of AllowedValues"},
		{"LogLevel", "LOUD", "not one of AllowedValues"},
		{"Jitter", "1.5", "does not match AllowedPattern"},
		{"SweepReservedConcurrency", "00", `"00": must be 0 (no reservation) or a whole number`},
		// The rule a FIFO route's name follows reads as a sentence, as
		// CloudFormation gives a ConstraintDescription.
		{"OrderedRoutes", "orders", `"orders": must be none or route[=block|skip],..., each route a FIFO route: its name ends in .fifo`},
	} {
		_, err := stack.Load(templatePath, map[string]string{tc.name: tc.value})
		require.ErrorContains(t, err, "parameter "+tc.name+": ", "%s=%q", tc.name, tc.value)
		require.ErrorContains(t, err, tc.want, "%s=%q", tc.name, tc.value)
	}
}
