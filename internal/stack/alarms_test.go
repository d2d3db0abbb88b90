package stack_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

type alarmProps struct {
	Namespace, MetricName, Statistic, ComparisonOperator, TreatMissingData string
	Dimensions                                                             []struct{ Name, Value string }
	Period, EvaluationPeriods, DatapointsToAlarm                           int
	Threshold                                                              float64
	// Metrics is a metric math alarm's queries, in place of the above.
	Metrics []metricQuery
}

// metricQuery is one query of a metric math alarm: a metric or an
// expression over the others.
type metricQuery struct {
	Id, Expression, Label string
	ReturnData            *bool
	MetricStat            *struct {
		Metric struct {
			Namespace, MetricName string
			Dimensions            []struct{ Name, Value string }
		}
		Period int
		Stat   string
	}
}

// watched is each metric an alarm reads: its own, or its metric math
// queries'.
func (a alarmProps) watched() []alarmProps {
	if len(a.Metrics) == 0 {
		return []alarmProps{a}
	}
	var out []alarmProps
	for _, q := range a.Metrics {
		if q.MetricStat != nil {
			m := q.MetricStat.Metric
			out = append(out, alarmProps{Namespace: m.Namespace, MetricName: m.MetricName, Dimensions: m.Dimensions,
				Statistic: q.MetricStat.Stat, Period: q.MetricStat.Period})
		}
	}
	return out
}

func alarm(t *testing.T, tpl *stack.Template, name string) alarmProps {
	t.Helper()
	var a alarmProps
	resourceOf(t, tpl, name, "AWS::CloudWatch::Alarm", &a)
	return a
}

// sweepInterval is the resolved SweepRate as a duration.
func sweepInterval(t *testing.T, tpl *stack.Template) time.Duration {
	t.Helper()
	return rateInterval(t, fmt.Sprint(tpl.Parameters["SweepRate"].Value))
}

func TestTemplate_BacklogAlarmSurvivesGapsBetweenSweeps(t *testing.T) {
	t.Parallel()
	tp := load(t, nil)
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
			// Every one of at least two periods must be empty: one empty
			// period can be a late sweep, two in a row cannot (the sweep
			// interval is at most one period).
			require.GreaterOrEqual(t, a.EvaluationPeriods, 2, "%s: one empty period is not a missed sweep", which)
			require.Equal(t, a.EvaluationPeriods, a.DatapointsToAlarm, "%s: every evaluated period without a sweep", which)
		}
	}
}

func TestTemplate_StreamAlarmsFireBeforeRecordsAreDropped(t *testing.T) {
	t.Parallel()
	tp := load(t, nil)
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

func TestTemplate_AlarmsWatchEmittedMetrics(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	// With a key the stack has the bus's dead-letter queue and its alarm.
	for _, key := range []string{"", testKey} {
		tpl := load(t, map[string]string{"KmsKeyArn": key})
		for _, name := range tpl.OfType("AWS::CloudWatch::Alarm") {
			watched := alarm(t, tpl, name).watched()
			require.NotEmpty(t, watched, name)
			for _, a := range watched {
				seen[a.MetricName] = true
				dims := map[string]string{}
				for _, d := range a.Dimensions {
					dims[d.Name] = d.Value
				}
				requireEmitted(t, name, a.Namespace, a.MetricName, dims)
			}
		}
	}
	for _, m := range []string{"DeadLettered", "MissedRows", "OldestDueAgeMs", "OldestBlockedAgeMs", "Errors", "IteratorAge", "Invocations", "DroppedEventCount", "ApproximateNumberOfMessagesVisible"} {
		require.True(t, seen[m], "an alarm on %s", m)
	}
}

func TestTemplate_BlockedGroupAlarmFiresAfterTheParametersMinutes(t *testing.T) {
	t.Parallel()
	for _, minutes := range []string{"1", "15", "1440"} {
		tp := load(t, map[string]string{"BlockedGroupAlarmMinutes": minutes})
		a := alarm(t, tp, "BlockedGroupAlarm")
		require.Empty(t, a.MetricName, "metric math: the threshold is in minutes, the metric in ms")
		require.Len(t, a.Metrics, 2)
		watched := a.watched()
		require.Len(t, watched, 1)
		age := watched[0]
		require.Equal(t, "OldestBlockedAgeMs", age.MetricName)
		require.Equal(t, "Maximum", age.Statistic, "the oldest head, whichever invocation saw it")
		require.GreaterOrEqual(t, time.Duration(age.Period)*time.Second, sweepInterval(t, tp), "each period can hold a sweep")

		var returned []metricQuery
		for _, q := range a.Metrics {
			require.NotNil(t, q.ReturnData, "%s: ReturnData is explicit", q.Id)
			if *q.ReturnData {
				returned = append(returned, q)
			}
		}
		require.Len(t, returned, 1, "an alarm evaluates exactly one series")
		var statID string
		for _, q := range a.Metrics {
			if q.MetricStat != nil {
				statID = q.Id
			}
		}
		require.Equal(t, statID+" / 60000", returned[0].Expression, "milliseconds to minutes")

		want, err := strconv.ParseFloat(minutes, 64)
		require.NoError(t, err)
		require.Equal(t, want, a.Threshold)
		require.Equal(t, "GreaterThanThreshold", a.ComparisonOperator)
		require.Equal(t, "notBreaching", a.TreatMissingData, "no data: no invocation found a blocked group")
		// With 1 of N, the alarm stays up while any evaluated period saw the
		// group blocked: a window of two sweep intervals at the slowest
		// SweepRate always holds a sweep, so one without does not clear it.
		require.Equal(t, 1, a.DatapointsToAlarm)
		require.GreaterOrEqual(t, time.Duration(a.EvaluationPeriods*age.Period)*time.Second, 2*5*time.Minute)
	}
	for _, refused := range []string{"0", "1441"} {
		_, err := stack.Load(templatePath, map[string]string{"BlockedGroupAlarmMinutes": refused})
		require.Error(t, err, refused)
	}
}
