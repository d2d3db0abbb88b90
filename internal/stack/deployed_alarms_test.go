package stack_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// dims is a metric's dimensions as name=value pairs, placeholders filled.
func (d *deployment) dims(t *testing.T, in []struct{ Name, Value string }) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, x := range in {
		out[x.Name] = d.sub(t, x.Value)
	}
	return out
}

func gotDims(in []cwtypes.Dimension) map[string]string {
	out := map[string]string{}
	for _, x := range in {
		out[aws.ToString(x.Name)] = aws.ToString(x.Value)
	}
	return out
}

// checkAlarms reads each alarm: its metric (or metric math), dimensions
// naming the deployed resources, statistic, period, threshold, comparison,
// missing-data treatment and actions.
func (d *deployment) checkAlarms(t *testing.T) {
	// Partly circular: moto's CloudFormation cannot create an alarm, so
	// internal/moto/cloudformation.py creates each one from the template's
	// own properties, and this reads back what it wrote. What it proves is
	// the wiring (the deployed names, the substituted dimensions and the
	// topic the alarm notifies) and that the properties are the API's; not
	// that CloudFormation would create the alarms so. The authority on the
	// alarms' settings is the template-level tests (alarms_test.go).
	ctx := context.Background()
	cw := cloudWatch(d.cfg)
	names := d.tpl.OfType("AWS::CloudWatch::Alarm")
	require.NotEmpty(t, names)
	topic := deployParameters["AlarmTopicArn"]
	for _, name := range names {
		var want struct {
			alarmProps
			AlarmActions []string
		}
		resourceOf(t, d.tpl, name, "AWS::CloudWatch::Alarm", &want)
		out, err := cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNames: []string{d.ids[name]}})
		require.NoError(t, err, name)
		require.Len(t, out.MetricAlarms, 1, name)
		got := out.MetricAlarms[0]

		require.Equal(t, want.Namespace, aws.ToString(got.Namespace), name)
		require.Equal(t, want.MetricName, aws.ToString(got.MetricName), name)
		require.Equal(t, want.Statistic, string(got.Statistic), name)
		require.Equal(t, d.dims(t, want.Dimensions), gotDims(got.Dimensions), name)
		require.Equal(t, want.Period, int(aws.ToInt32(got.Period)), name)
		require.Equal(t, want.EvaluationPeriods, int(aws.ToInt32(got.EvaluationPeriods)), name)
		require.Equal(t, want.DatapointsToAlarm, int(aws.ToInt32(got.DatapointsToAlarm)), name)
		require.NotNil(t, got.Threshold, name)
		require.Equal(t, want.Threshold, *got.Threshold, name)
		d.requireWired(t, name, "Threshold", *got.Threshold)
		d.requireWired(t, name, "Period", aws.ToInt32(got.Period))
		require.Equal(t, want.ComparisonOperator, string(got.ComparisonOperator), name)
		require.Equal(t, want.TreatMissingData, aws.ToString(got.TreatMissingData), name)
		require.Equal(t, []string{topic}, want.AlarmActions, "%s notifies AlarmTopicArn", name)
		require.Equal(t, want.AlarmActions, got.AlarmActions, name)

		require.Len(t, got.Metrics, len(want.Metrics), name)
		for i, w := range want.Metrics {
			g := got.Metrics[i]
			require.Equal(t, w.Id, aws.ToString(g.Id), name)
			require.Equal(t, w.Expression, aws.ToString(g.Expression), name)
			require.Equal(t, w.Label, aws.ToString(g.Label), name)
			require.NotNil(t, w.ReturnData, name)
			require.Equal(t, *w.ReturnData, aws.ToBool(g.ReturnData), name)
			if w.MetricStat == nil {
				require.Nil(t, g.MetricStat, name)
				continue
			}
			require.NotNil(t, g.MetricStat, name)
			m := w.MetricStat.Metric
			require.Equal(t, m.Namespace, aws.ToString(g.MetricStat.Metric.Namespace), name)
			require.Equal(t, m.MetricName, aws.ToString(g.MetricStat.Metric.MetricName), name)
			require.Equal(t, d.dims(t, m.Dimensions), gotDims(g.MetricStat.Metric.Dimensions), name)
			require.Equal(t, w.MetricStat.Period, int(aws.ToInt32(g.MetricStat.Period)), name)
			require.Equal(t, w.MetricStat.Stat, aws.ToString(g.MetricStat.Stat), name)
		}
	}
}

// checkDashboard reads the dashboard: its body is the template's, with the
// deployed names and alarm ARNs in place.
func (d *deployment) checkDashboard(t *testing.T) {
	names := d.tpl.OfType("AWS::CloudWatch::Dashboard")
	require.Len(t, names, 1)
	var want struct{ DashboardName, DashboardBody string }
	resourceOf(t, d.tpl, names[0], "AWS::CloudWatch::Dashboard", &want)
	got, err := cloudWatch(d.cfg).GetDashboard(context.Background(), &cloudwatch.GetDashboardInput{DashboardName: aws.String(d.ids[names[0]])})
	require.NoError(t, err)
	// The translation resolves AWS::StackName to stack.StackName; the test
	// stack has a name of its own.
	require.Equal(t, stack.StackName+"-"+stack.Region, want.DashboardName)
	require.Equal(t, d.name+"-"+d.cfg.Region, aws.ToString(got.DashboardName))
	require.JSONEq(t, d.sub(t, want.DashboardBody), aws.ToString(got.DashboardBody))
}
