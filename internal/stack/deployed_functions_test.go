package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/stretchr/testify/require"
)

// lambdaFunction is an AWS::Lambda::Function's properties, as SAM
// translates Outflow's functions.
type lambdaFunction struct {
	Runtime, Handler, Role       string
	Architectures                []string
	MemorySize, Timeout          int
	ReservedConcurrentExecutions *json.Number
	Environment                  struct{ Variables map[string]string }
}

// requireRole checks that arn is the role a "${Role.Arn}" placeholder
// names: the API has no account-free way to compare, the role's generated
// name (its physical ID) ends the ARN.
func (d *deployment) requireRole(t *testing.T, placeholder, arn string) {
	t.Helper()
	require.True(t, strings.HasSuffix(arn, ":role/"+d.ids[logical(placeholder)]), "%s is %s", arn, placeholder)
}

// checkFunctions reads each function's runtime, architecture, memory,
// timeout, role, environment, reserved concurrency and asynchronous invoke
// settings.
func (d *deployment) checkFunctions(t *testing.T) {
	ctx := context.Background()
	lam := lambda.NewFromConfig(d.cfg)
	names := d.tpl.OfType("AWS::Lambda::Function")
	require.Len(t, names, 2)
	for _, name := range names {
		var want lambdaFunction
		resourceOf(t, d.tpl, name, "AWS::Lambda::Function", &want)
		out, err := lam.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(d.ids[name])})
		require.NoError(t, err, name)
		got := out.Configuration
		require.Equal(t, want.Runtime, string(got.Runtime), name)
		require.Equal(t, want.Handler, aws.ToString(got.Handler), name)
		// Partly circular: moto's CloudFormation drops Architectures, and
		// internal/moto/cloudformation.py puts back the template's own. The
		// authority is TestTemplate_FunctionsAreGoOnGravitonWithJSONLogs.
		var arch []string
		for _, a := range got.Architectures {
			arch = append(arch, string(a))
		}
		require.Equal(t, want.Architectures, arch, name)
		require.Equal(t, want.MemorySize, int(aws.ToInt32(got.MemorySize)), name)
		require.Equal(t, want.Timeout, int(aws.ToInt32(got.Timeout)), name)
		d.requireWired(t, name, "MemorySize", aws.ToInt32(got.MemorySize))
		d.requireWired(t, name, "Timeout", aws.ToInt32(got.Timeout))
		d.requireRole(t, want.Role, aws.ToString(got.Role))

		require.NotNil(t, got.Environment, name)
		wantEnv := map[string]string{}
		for k, v := range want.Environment.Variables {
			wantEnv[k] = d.sub(t, v)
		}
		require.Equal(t, wantEnv, got.Environment.Variables, name)
		require.Equal(t, d.ids["OutboxTable"], got.Environment.Variables["OUTFLOW_TABLE"], name)
		require.Equal(t, fmt.Sprintf("%ds", aws.ToInt32(got.Timeout)), got.Environment.Variables["OUTFLOW_FUNCTION_TIMEOUT"], "%s knows its own timeout", name)
		for _, queue := range d.tpl.OfType("AWS::SQS::Queue") {
			if !strings.HasSuffix(queue, "DLQ") {
				require.Contains(t, got.Environment.Variables["OUTFLOW_ROUTES"], "="+d.ids[queue], "%s routes to %s", name, queue)
			}
		}
		for _, topic := range d.tpl.OfType("AWS::SNS::Topic") {
			require.Contains(t, got.Environment.Variables["OUTFLOW_ROUTES"], "="+d.ids[topic], "%s routes to %s", name, topic)
		}
		for _, bus := range d.tpl.OfType("AWS::Events::EventBus") {
			require.Contains(t, got.Environment.Variables["OUTFLOW_ROUTES"], "="+d.values[bus+".Arn"]+"?", "%s routes to %s", name, bus)
		}

		conc, err := lam.GetFunctionConcurrency(ctx, &lambda.GetFunctionConcurrencyInput{FunctionName: aws.String(d.ids[name])})
		require.NoError(t, err, name)
		if want.ReservedConcurrentExecutions == nil {
			require.Nil(t, conc.ReservedConcurrentExecutions, "%s reserves nothing", name)
		} else {
			n, err := want.ReservedConcurrentExecutions.Int64()
			require.NoError(t, err, name)
			require.NotNil(t, conc.ReservedConcurrentExecutions, name)
			require.Equal(t, n, int64(*conc.ReservedConcurrentExecutions), name)
			d.requireWired(t, name, "ReservedConcurrentExecutions", *conc.ReservedConcurrentExecutions)
		}
	}

	// Partly circular: moto's CloudFormation cannot create an
	// EventInvokeConfig, so internal/moto/cloudformation.py creates each
	// from the template's own properties, and this reads back what it
	// wrote: it proves the function it names resolves to the deployed one,
	// not the settings. The authority on those is the template-level
	// tests (TestTranslation_SweepInvokesAreNeitherRetriedNorKept,
	// TestTranslation_SweepAsyncSettingsAreWithinAWSRanges).
	configs := d.tpl.OfType("AWS::Lambda::EventInvokeConfig")
	require.NotEmpty(t, configs)
	for _, name := range configs {
		var want struct {
			FunctionName, Qualifier                        string
			MaximumRetryAttempts, MaximumEventAgeInSeconds *int
		}
		resourceOf(t, d.tpl, name, "AWS::Lambda::EventInvokeConfig", &want)
		got, err := lam.GetFunctionEventInvokeConfig(ctx, &lambda.GetFunctionEventInvokeConfigInput{
			FunctionName: aws.String(d.sub(t, want.FunctionName)), Qualifier: aws.String(want.Qualifier),
		})
		require.NoError(t, err, name)
		require.NotNil(t, want.MaximumRetryAttempts, name)
		require.NotNil(t, want.MaximumEventAgeInSeconds, name)
		require.Equal(t, *want.MaximumRetryAttempts, int(aws.ToInt32(got.MaximumRetryAttempts)), name)
		require.Equal(t, *want.MaximumEventAgeInSeconds, int(aws.ToInt32(got.MaximumEventAgeInSeconds)), name)
	}
}

// checkMapping reads the wake's stream mapping: its source, function,
// filter, batching, retries, record age, bisect and parallelization.
func (d *deployment) checkMapping(t *testing.T) {
	ctx := context.Background()
	lam := lambda.NewFromConfig(d.cfg)
	names := d.tpl.OfType("AWS::Lambda::EventSourceMapping")
	require.Len(t, names, 1)
	var want struct {
		FunctionName, EventSourceArn, StartingPosition string
		Enabled, BisectBatchOnFunctionError            *bool
		BatchSize, MaximumBatchingWindowInSeconds      int
		ParallelizationFactor, MaximumRetryAttempts    int
		MaximumRecordAgeInSeconds                      int
		FunctionResponseTypes                          []string
		FilterCriteria                                 struct{ Filters []struct{ Pattern string } }
		MetricsConfig                                  struct{ Metrics []string }
	}
	resourceOf(t, d.tpl, names[0], "AWS::Lambda::EventSourceMapping", &want)
	got, err := lam.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(d.ids[names[0]])})
	require.NoError(t, err)

	require.Equal(t, d.sub(t, want.EventSourceArn), aws.ToString(got.EventSourceArn), "the table's stream")
	require.Equal(t, d.values[logical(want.FunctionName)+".Arn"], aws.ToString(got.FunctionArn))
	require.Equal(t, want.StartingPosition, string(got.StartingPosition))
	require.NotNil(t, want.Enabled)
	state := map[bool]string{true: "Enabled", false: "Disabled"}[*want.Enabled]
	require.Equal(t, state, aws.ToString(got.State))
	require.Equal(t, want.BatchSize, int(aws.ToInt32(got.BatchSize)))
	require.Equal(t, want.MaximumBatchingWindowInSeconds, int(aws.ToInt32(got.MaximumBatchingWindowInSeconds)))
	require.Equal(t, want.ParallelizationFactor, int(aws.ToInt32(got.ParallelizationFactor)))
	require.Equal(t, want.MaximumRetryAttempts, int(aws.ToInt32(got.MaximumRetryAttempts)))
	require.Equal(t, want.MaximumRecordAgeInSeconds, int(aws.ToInt32(got.MaximumRecordAgeInSeconds)))
	d.requireWired(t, names[0], "BatchSize", aws.ToInt32(got.BatchSize))
	d.requireWired(t, names[0], "MaximumBatchingWindowInSeconds", aws.ToInt32(got.MaximumBatchingWindowInSeconds))
	d.requireWired(t, names[0], "ParallelizationFactor", aws.ToInt32(got.ParallelizationFactor))
	d.requireWired(t, names[0], "MaximumRetryAttempts", aws.ToInt32(got.MaximumRetryAttempts))
	d.requireWired(t, names[0], "MaximumRecordAgeInSeconds", aws.ToInt32(got.MaximumRecordAgeInSeconds))
	require.NotNil(t, want.BisectBatchOnFunctionError)
	require.Equal(t, *want.BisectBatchOnFunctionError, aws.ToBool(got.BisectBatchOnFunctionError))
	var types []string
	for _, ft := range got.FunctionResponseTypes {
		types = append(types, string(ft))
	}
	require.Equal(t, want.FunctionResponseTypes, types)

	require.NotNil(t, got.FilterCriteria)
	var patterns, wantPatterns []string
	for _, f := range got.FilterCriteria.Filters {
		patterns = append(patterns, aws.ToString(f.Pattern))
	}
	for _, f := range want.FilterCriteria.Filters {
		wantPatterns = append(wantPatterns, f.Pattern)
	}
	require.NotEmpty(t, wantPatterns)
	require.Equal(t, wantPatterns, patterns)
	require.NotNil(t, got.MetricsConfig, "DroppedEventCount is published only with MetricsConfig")
	var metrics []string
	for _, m := range got.MetricsConfig.Metrics {
		metrics = append(metrics, string(m))
	}
	require.Equal(t, want.MetricsConfig.Metrics, metrics)
}

// checkSchedule reads the sweep's schedule: its rate, state, target and
// retry policy.
func (d *deployment) checkSchedule(t *testing.T) {
	// Partly circular: moto's CloudFormation cannot create a schedule, so
	// internal/moto/cloudformation.py creates it from the template's own
	// properties, and this reads back what it wrote. It proves the wiring
	// (the target is the deployed sweep, the role resolves, the expression
	// is the parameter's); the authority on the schedule's settings is the
	// template-level tests (template_test.go, partitions_test.go).
	ctx := context.Background()
	names := d.tpl.OfType("AWS::Scheduler::Schedule")
	require.Len(t, names, 1, "SAM's ScheduleV2 makes an EventBridge Scheduler schedule")
	var want struct {
		ScheduleExpression, State string
		FlexibleTimeWindow        struct{ Mode string }
		Target                    struct {
			Arn, RoleArn string
			RetryPolicy  *struct{ MaximumRetryAttempts, MaximumEventAgeInSeconds int }
		}
	}
	resourceOf(t, d.tpl, names[0], "AWS::Scheduler::Schedule", &want)
	got, err := scheduler.NewFromConfig(d.cfg).GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(d.ids[names[0]])})
	require.NoError(t, err)
	d.requireWired(t, names[0], "ScheduleExpression", aws.ToString(got.ScheduleExpression))
	require.Equal(t, want.ScheduleExpression, aws.ToString(got.ScheduleExpression))
	require.Equal(t, want.State, string(got.State))
	require.NotNil(t, got.FlexibleTimeWindow)
	require.Equal(t, want.FlexibleTimeWindow.Mode, string(got.FlexibleTimeWindow.Mode))
	require.NotNil(t, got.Target)
	require.Equal(t, d.sub(t, want.Target.Arn), aws.ToString(got.Target.Arn))
	require.Equal(t, d.values["SweepFunction.Arn"], aws.ToString(got.Target.Arn), "the schedule invokes the sweep")
	d.requireRole(t, want.Target.RoleArn, aws.ToString(got.Target.RoleArn))
	require.NotNil(t, want.Target.RetryPolicy)
	require.NotNil(t, got.Target.RetryPolicy)
	require.Equal(t, want.Target.RetryPolicy.MaximumRetryAttempts, int(aws.ToInt32(got.Target.RetryPolicy.MaximumRetryAttempts)))
	require.Equal(t, want.Target.RetryPolicy.MaximumEventAgeInSeconds, int(aws.ToInt32(got.Target.RetryPolicy.MaximumEventAgeInSeconds)))
}

// roleStatements reads a deployed role's inline policies back through IAM
// (KmsKeyPolicy and SweepInvokePolicy land there too) and returns their
// statements.
func (d *deployment) roleStatements(t *testing.T, role string) []statement {
	t.Helper()
	ctx := context.Background()
	client := iam.NewFromConfig(d.cfg)
	names, err := client.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(d.ids[role])})
	require.NoError(t, err, role)
	require.NotEmpty(t, names.PolicyNames, role)
	var out []statement
	for _, name := range names.PolicyNames {
		p, err := client.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(d.ids[role]), PolicyName: aws.String(name)})
		require.NoError(t, err, "%s %s", role, name)
		// IAM returns the document URL-encoded (moto: as JSON).
		doc, err := url.QueryUnescape(aws.ToString(p.PolicyDocument))
		require.NoError(t, err, "%s %s", role, name)
		var parsed struct{ Statement []map[string]any }
		require.NoError(t, json.Unmarshal([]byte(doc), &parsed), "%s %s: %s", role, name, doc)
		for _, s := range parsed.Statement {
			out = append(out, statement{Effect: fmt.Sprint(s["Effect"]), Action: list(s["Action"]), Resource: list(s["Resource"])})
		}
	}
	return out
}

// checkSweepPartitions reads the partitioned sweep back: its environment
// carries the partitions and the schedule's rate, and its role's inline
// policies (through IAM) hold exactly one Lambda grant, InvokeFunction on
// the deployed sweep's ARN; the wake's role holds none.
func (d *deployment) checkSweepPartitions(t *testing.T) {
	ctx := context.Background()
	out, err := lambda.NewFromConfig(d.cfg).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(d.ids["SweepFunction"])})
	require.NoError(t, err)
	env := out.Configuration.Environment.Variables
	require.Equal(t, deployParameters["SweepPartitions"], env["OUTFLOW_SWEEP_PARTITIONS"])
	require.Equal(t, deployParameters["SweepRate"], env["OUTFLOW_SWEEP_RATE"])

	require.Contains(t, d.ids, "SweepInvokePolicy", "the partitioned stack has the invoke policy")
	grants := map[string][]statement{}
	for _, role := range []string{"SweepRole", "WakeRole"} {
		for _, st := range d.roleStatements(t, role) {
			if granted, _ := invokeStatements([]statement{st}); len(granted) > 0 {
				grants[role] = append(grants[role], st)
			}
		}
	}
	require.Equal(t, []statement{{Effect: "Allow", Action: []string{"lambda:InvokeFunction"}, Resource: []string{d.values["SweepFunction.Arn"]}}}, grants["SweepRole"])
	require.Empty(t, grants["WakeRole"])
}
