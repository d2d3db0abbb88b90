package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// The tests in this file check the template as AWS runs it: many on SAM's
// own translation of it (what CloudFormation is really asked to create),
// some on the template's parameters and alarms as written.

var translation struct {
	once sync.Once
	raw  []byte
	err  error
}

// translatedRaw is the template's SAM translation, made once per test run.
func translatedRaw(t *testing.T) []byte {
	t.Helper()
	translation.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		translation.raw, translation.err = stack.Translate(ctx, templatePath)
	})
	require.NoError(t, translation.err)
	return translation.raw
}

// translated is the SAM translation with its intrinsics resolved.
func translated(t *testing.T, overrides map[string]string) *stack.Template {
	t.Helper()
	tpl, err := stack.Parse(translatedRaw(t), overrides)
	require.NoError(t, err)
	return tpl
}

// resourceOf decodes the one resource named logical of type typ.
func resourceOf(t *testing.T, tpl *stack.Template, logical, typ string, v any) {
	t.Helper()
	r, ok := tpl.Resources[logical]
	require.True(t, ok, "no resource %s", logical)
	require.Equal(t, typ, r.Type, logical)
	require.NoError(t, r.Decode(v), logical)
}

type alarmProps struct {
	Namespace, MetricName, Statistic, ComparisonOperator, TreatMissingData string
	Dimensions                                                             []struct{ Name, Value string }
	Period, EvaluationPeriods, DatapointsToAlarm                           int
	Threshold                                                              float64
}

func alarm(t *testing.T, tpl *stack.Template, name string) alarmProps {
	t.Helper()
	var a alarmProps
	resourceOf(t, tpl, name, "AWS::CloudWatch::Alarm", &a)
	return a
}

// sweepInterval is the default SweepRate as a duration.
func sweepInterval(t *testing.T, tpl *stack.Template) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours)\)$`).FindStringSubmatch(fmt.Sprint(tpl.Parameters["SweepRate"].Value))
	require.NotNil(t, m, "SweepRate is a rate()")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	if strings.HasPrefix(m[2], "hour") {
		return time.Duration(n) * time.Hour
	}
	return time.Duration(n) * time.Minute
}

// Lambda's own metrics (AWS/Lambda) Outflow watches, by the dimension they
// are published under.
var (
	lambdaFunctionMetrics = []string{"Invocations", "Errors", "Throttles", "Duration", "IteratorAge"}
	// Published for the mapping only with MetricsConfig EventCount.
	mappingEventCountMetrics = []string{"PolledEventCount", "InvokedEventCount", "FilteredOutEventCount", "FailedInvokeEventCount", "DroppedEventCount"}
)

// requireEmitted fails unless the metric is one something in this stack
// publishes, under exactly these dimensions: Outflow's EMF record (the
// namespace the functions are given, the dimensions telemetry emits), a
// function's Lambda metrics, or the wake mapping's event counts.
func requireEmitted(t *testing.T, what, namespace, metric string, dims map[string]string) {
	t.Helper()
	ours := function(t, load(t, nil), "SweepFunction").Environment.Variables["OUTFLOW_METRICS_NAMESPACE"]
	require.NotEmpty(t, ours)
	switch namespace {
	case ours:
		require.Contains(t, telemetry.MetricNames(), metric, "%s: Outflow does not emit %s", what, metric)
		require.ElementsMatch(t, telemetry.Dimensions(), slices.Collect(maps.Keys(dims)), "%s: %s dimensions", what, metric)
		require.Equal(t, "${OutboxTable}", dims["Table"], what)
	case "AWS/Lambda":
		switch {
		case slices.Contains(lambdaFunctionMetrics, metric):
			require.Len(t, dims, 1, what)
			require.Contains(t, []string{"${SweepFunction}", "${WakeFunction}"}, dims["FunctionName"], "%s: %s of a function of this stack", what, metric)
			if metric == "IteratorAge" {
				require.Equal(t, "${WakeFunction}", dims["FunctionName"], "%s: only the stream function has an iterator age", what)
			}
		case slices.Contains(mappingEventCountMetrics, metric):
			require.Equal(t, map[string]string{"EventSourceMappingUUID": "${WakeFunctionStream}"}, dims, what)
			var esm struct{ MetricsConfig struct{ Metrics []string } }
			resourceOf(t, translated(t, nil), "WakeFunctionStream", "AWS::Lambda::EventSourceMapping", &esm)
			require.Contains(t, esm.MetricsConfig.Metrics, "EventCount", "%s: the mapping publishes %s only with MetricsConfig EventCount", what, metric)
		default:
			require.Failf(t, "unexpected Lambda metric", "%s: %s", what, metric)
		}
	default:
		require.Failf(t, "unexpected namespace", "%s: %s (the functions emit %s)", what, namespace, ours)
	}
}

func TestTranslation_HasNoFixedPhysicalNames(t *testing.T) {
	t.Parallel()
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(translatedRaw(t), &doc))
	// The property that names each resource type the stack has, with its
	// length limit; "" for types that have no name of their own.
	nameProp := map[string]string{
		"AWS::Lambda::Function": "FunctionName", "AWS::Scheduler::Schedule": "Name", "AWS::Logs::LogGroup": "LogGroupName",
		"AWS::CloudWatch::Dashboard": "DashboardName", "AWS::CloudWatch::Alarm": "AlarmName", "AWS::IAM::Role": "RoleName",
		"AWS::SQS::Queue": "QueueName", "AWS::DynamoDB::Table": "TableName",
		"AWS::Lambda::EventSourceMapping": "", "AWS::Lambda::EventInvokeConfig": "",
	}
	limit := map[string]int{"FunctionName": 64, "Name": 64, "LogGroupName": 512, "DashboardName": 255, "AlarmName": 255, "RoleName": 64, "QueueName": 80, "TableName": 255}
	// The longest stack name CloudFormation accepts, and a long region.
	longStack, longRegion := "s"+strings.Repeat("x", 127), "ap-southeast-99"
	for logical, r := range doc.Resources {
		prop, known := nameProp[r.Type]
		require.True(t, known, "%s: new resource type %s; add whether it has a physical name", logical, r.Type)
		if prop == "" || r.Properties[prop] == nil {
			continue
		}
		sub, _ := r.Properties[prop].(map[string]any)["Fn::Sub"].(string)
		require.Contains(t, sub, "${AWS::StackName}", "%s: %s %v is fixed; two stacks in one account and region would collide", logical, prop, r.Properties[prop])
		name := strings.NewReplacer("${AWS::StackName}", longStack, "${AWS::Region}", longRegion).Replace(sub)
		require.NotContains(t, name, "${", logical)
		require.LessOrEqual(t, len(name), limit[prop], "%s: %s too long for a %d-character stack name", logical, prop, len(longStack))
	}
	for logical, r := range doc.Resources {
		if r.Type == "AWS::Scheduler::Schedule" || r.Type == "AWS::Lambda::Function" {
			require.Nil(t, r.Properties[nameProp[r.Type]], "%s: CloudFormation names it", logical)
		}
	}
}

func TestTemplate_ParametersAreBounded(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for name, p := range tpl.Parameters {
		if p.Type != "Number" {
			continue
		}
		def, err := strconv.ParseFloat(fmt.Sprint(p.Default), 64)
		require.NoError(t, err, name)
		if len(p.AllowedValues) > 0 {
			require.Contains(t, p.AllowedValues, p.Default, name)
			continue
		}
		require.NotNil(t, p.MinValue, "%s has no MinValue", name)
		require.NotNil(t, p.MaxValue, "%s has no MaxValue", name)
		require.LessOrEqual(t, *p.MinValue, def, name)
		require.LessOrEqual(t, def, *p.MaxValue, name)
	}
	for _, name := range []string{"SweepMemoryMB", "WakeMemoryMB"} {
		require.Equal(t, 128.0, *tpl.Parameters[name].MinValue, name)
		require.Equal(t, 10240.0, *tpl.Parameters[name].MaxValue, name)
	}
	for _, name := range []string{"SweepTimeoutSeconds", "WakeTimeoutSeconds"} {
		require.GreaterOrEqual(t, *tpl.Parameters[name].MinValue, 1.0, name)
		require.LessOrEqual(t, *tpl.Parameters[name].MaxValue, 900.0, "%s: Lambda's limit", name)
	}
	// The values CloudWatch Logs accepts for RetentionInDays.
	retention := []any{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
	var got []float64
	for _, v := range tpl.Parameters["LogRetentionDays"].AllowedValues {
		got = append(got, v.(float64))
	}
	var want []float64
	for _, v := range retention {
		want = append(want, float64(v.(int)))
	}
	require.Equal(t, want, got)
	require.NotEmpty(t, tpl.Parameters["Jitter"].AllowedPattern, "Jitter is a number in a string")
}

func TestTemplate_SweepReservesNoConcurrencyUnlessAsked(t *testing.T) {
	t.Parallel()
	p := tpl(t).Parameters["SweepReservedConcurrency"]
	require.Equal(t, 0.0, p.Default)
	require.Contains(t, p.Description, "quota", "the parameter says what quota a reservation needs")
	for _, tc := range []struct {
		value string
		want  *int
	}{{"0", nil}, {"2", ptr(2)}} {
		overrides := map[string]string{"SweepReservedConcurrency": tc.value}
		require.Equal(t, tc.want, function(t, load(t, overrides), "SweepFunction").ReservedConcurrentExecutions, "template, %s", tc.value)
		var fn struct{ ReservedConcurrentExecutions *int }
		resourceOf(t, translated(t, overrides), "SweepFunction", "AWS::Lambda::Function", &fn)
		require.Equal(t, tc.want, fn.ReservedConcurrentExecutions, "translation, %s", tc.value)
	}
}

func tpl(t *testing.T) *stack.Template { return load(t, nil) }

func ptr[T any](v T) *T { return &v }

func TestTranslation_SweepInvokesAreNeitherRetriedNorKept(t *testing.T) {
	t.Parallel()
	tr := translated(t, nil)
	interval := sweepInterval(t, tr)
	var configs []string
	for _, name := range tr.OfType("AWS::Lambda::EventInvokeConfig") {
		var c struct {
			FunctionName                                   string
			MaximumRetryAttempts, MaximumEventAgeInSeconds *int
		}
		resourceOf(t, tr, name, "AWS::Lambda::EventInvokeConfig", &c)
		configs = append(configs, c.FunctionName)
		if c.FunctionName != "${SweepFunction}" {
			continue
		}
		require.NotNil(t, c.MaximumRetryAttempts)
		require.Zero(t, *c.MaximumRetryAttempts, "the schedule is the retry")
		require.NotNil(t, c.MaximumEventAgeInSeconds)
		require.LessOrEqual(t, time.Duration(*c.MaximumEventAgeInSeconds)*time.Second, interval, "an event older than the next sweep is useless")
	}
	require.Contains(t, configs, "${SweepFunction}")
	var sched struct {
		Target struct {
			Arn         string
			RetryPolicy struct{ MaximumRetryAttempts, MaximumEventAgeInSeconds *int }
		}
	}
	names := tr.OfType("AWS::Scheduler::Schedule")
	require.Len(t, names, 1)
	resourceOf(t, tr, names[0], "AWS::Scheduler::Schedule", &sched)
	require.Equal(t, "${SweepFunction.Arn}", sched.Target.Arn)
	require.NotNil(t, sched.Target.RetryPolicy.MaximumRetryAttempts)
	require.Zero(t, *sched.Target.RetryPolicy.MaximumRetryAttempts)
	require.NotNil(t, sched.Target.RetryPolicy.MaximumEventAgeInSeconds)
	require.LessOrEqual(t, time.Duration(*sched.Target.RetryPolicy.MaximumEventAgeInSeconds)*time.Second, interval)
}

func TestTranslation_SystemLogsKeepStartAndReport(t *testing.T) {
	t.Parallel()
	tr := translated(t, nil)
	fns := tr.OfType("AWS::Lambda::Function")
	require.Len(t, fns, 2)
	for _, name := range fns {
		var fn struct {
			LoggingConfig struct{ LogFormat, ApplicationLogLevel, SystemLogLevel string }
		}
		resourceOf(t, tr, name, "AWS::Lambda::Function", &fn)
		require.Equal(t, "JSON", fn.LoggingConfig.LogFormat, name)
		require.Equal(t, tr.Parameters["LogLevel"].Value, fn.LoggingConfig.ApplicationLogLevel, name)
		// WARN drops the START and REPORT lines (duration, memory, init).
		require.Contains(t, []string{"INFO", "DEBUG"}, fn.LoggingConfig.SystemLogLevel, name)
	}
}

func TestTemplate_BacklogAlarmSurvivesGapsBetweenSweeps(t *testing.T) {
	t.Parallel()
	tp := tpl(t)
	a := alarm(t, tp, "BacklogAlarm")
	require.Equal(t, "OldestDueAgeMs", a.MetricName)
	require.Equal(t, "Maximum", a.Statistic)
	require.GreaterOrEqual(t, time.Duration(a.Period)*time.Second, 5*sweepInterval(t, tp), "each period holds several sweeps")
	require.Positive(t, a.DatapointsToAlarm)
	require.Less(t, a.DatapointsToAlarm, a.EvaluationPeriods, "M of N: one empty or low period does not hold it back")
	// notBreaching turns each gap into OK; breaching would alarm on a
	// stopped sweep, which NoSweepAlarm reports on its own.
	require.Equal(t, "ignore", a.TreatMissingData)
}

func TestTemplate_NoSweepAlarmFollowsTheKillSwitch(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{true, false} {
		overrides := map[string]string{"DispatcherEnabled": fmt.Sprint(enabled)}
		for which, tp := range map[string]*stack.Template{"template": load(t, overrides), "translation": translated(t, overrides)} {
			_, present := tp.Resources["NoSweepAlarm"]
			require.Equal(t, enabled, present, "%s, enabled=%v", which, enabled)
			if !present {
				continue
			}
			a := alarm(t, tp, "NoSweepAlarm")
			require.Equal(t, "AWS/Lambda", a.Namespace)
			require.Equal(t, "Invocations", a.MetricName)
			require.Equal(t, []struct{ Name, Value string }{{"FunctionName", "${SweepFunction}"}}, a.Dimensions)
			require.Equal(t, "breaching", a.TreatMissingData, "no invocations publish no data point")
			require.Equal(t, "LessThanThreshold", a.ComparisonOperator)
			require.Equal(t, 1.0, a.Threshold)
			require.Greater(t, time.Duration(a.Period)*time.Second, sweepInterval(t, tp), "%s: a period without a sweep is a missed sweep", which)
		}
	}
}

func TestTemplate_StreamAlarmsFireBeforeRecordsAreDropped(t *testing.T) {
	t.Parallel()
	tp := tpl(t)
	var ev stack.StreamEvent
	require.NoError(t, function(t, tp, "WakeFunction").Event("DynamoDB", &ev))
	dropAfter := time.Duration(ev.MaximumRecordAgeInSeconds) * time.Second
	age := alarm(t, tp, "StreamIteratorAgeAlarm")
	require.Equal(t, "IteratorAge", age.MetricName)
	require.LessOrEqual(t, time.Duration(age.Threshold)*time.Millisecond, dropAfter/2, "well below the age at which the mapping drops records")

	dropped := alarm(t, tp, "StreamDroppedRecordsAlarm")
	require.Equal(t, "AWS/Lambda", dropped.Namespace)
	require.Equal(t, "DroppedEventCount", dropped.MetricName)
	require.Equal(t, []struct{ Name, Value string }{{"EventSourceMappingUUID", "${WakeFunctionStream}"}}, dropped.Dimensions)
	require.Equal(t, "GreaterThanThreshold", dropped.ComparisonOperator)
	require.Zero(t, dropped.Threshold)
	// The dimension names the mapping SAM generates, which publishes the
	// metric only with MetricsConfig EventCount.
	var esm struct {
		FunctionName  string
		MetricsConfig struct{ Metrics []string }
	}
	resourceOf(t, translated(t, nil), "WakeFunctionStream", "AWS::Lambda::EventSourceMapping", &esm)
	require.Equal(t, "${WakeFunction}", esm.FunctionName)
	require.Contains(t, esm.MetricsConfig.Metrics, "EventCount")
}

// dashboard is the part of a CloudWatch dashboard body the tests read.
type dashboard struct {
	Widgets []struct {
		Type       string
		Properties struct {
			Metrics [][]any
			Alarms  []string
		}
	}
}

func TestTranslation_DashboardPlotsWhatTheStackEmits(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{true, false} {
		tr := translated(t, map[string]string{"DispatcherEnabled": fmt.Sprint(enabled)})
		names := tr.OfType("AWS::CloudWatch::Dashboard")
		require.Len(t, names, 1)
		var d struct{ DashboardName, DashboardBody string }
		resourceOf(t, tr, names[0], "AWS::CloudWatch::Dashboard", &d)
		require.Equal(t, stack.StackName+"-"+stack.Region, d.DashboardName, "dashboards are global: scoped to the stack and the region")

		var body dashboard
		require.NoError(t, json.Unmarshal([]byte(d.DashboardBody), &body), d.DashboardBody)
		plotted := map[string]bool{}
		var alarms []string
		for _, w := range body.Widgets {
			alarms = append(alarms, w.Properties.Alarms...)
			for _, row := range w.Properties.Metrics {
				var parts []string
				for _, v := range row {
					if s, ok := v.(string); ok {
						parts = append(parts, s)
					}
				}
				require.GreaterOrEqual(t, len(parts), 2, "%v", row)
				require.NotEqual(t, ".", parts[0], "rows are written out in full, so they can be checked")
				require.Zero(t, len(parts[2:])%2, "%v: dimension name and value pairs", row)
				dims := map[string]string{}
				for i := 2; i < len(parts); i += 2 {
					dims[parts[i]] = parts[i+1]
				}
				requireEmitted(t, "dashboard", parts[0], parts[1], dims)
				plotted[parts[1]+" "+strings.Join(slices.Sorted(maps.Values(dims)), ",")] = true
			}
		}
		for _, want := range []string{
			"OldestDueAgeMs ${OutboxTable}", "Delivered ${OutboxTable}", "Retried ${OutboxTable}", "DeadLettered ${OutboxTable}", "Conflicts ${OutboxTable}",
			"Duration ${SweepFunction}", "Errors ${SweepFunction}", "IteratorAge ${WakeFunction}", "DroppedEventCount ${WakeFunctionStream}",
		} {
			require.True(t, plotted[want], "the dashboard plots %s", want)
		}
		var want []string
		for _, name := range tr.OfType("AWS::CloudWatch::Alarm") {
			want = append(want, "${"+name+".Arn}")
		}
		require.ElementsMatch(t, want, alarms, "the dashboard shows every alarm's state (enabled=%v)", enabled)
	}
}

func TestReadme_LinksTheDashboardAndSaysWhatAReservationNeeds(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	require.Contains(t, text, "`DashboardUrl`")
	require.Contains(t, tpl(t).Outputs, "DashboardUrl")
	require.Contains(t, text, "unreserved")
}
