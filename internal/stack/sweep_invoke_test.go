package stack_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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

// TestTranslation_SweepAsyncSettingsAreWithinAWSRanges checks the sweep's
// invoke settings against the services' documented ranges, which neither
// sam validate nor the other tests notice: Lambda's EventInvokeConfig
// (MaximumEventAgeInSeconds 60-21600, MaximumRetryAttempts 0-2) and
// EventBridge Scheduler's RetryPolicy (60-86400, 0-185).
func TestTranslation_SweepAsyncSettingsAreWithinAWSRanges(t *testing.T) {
	t.Parallel()
	tr := translated(t, nil)
	var cfg struct{ MaximumRetryAttempts, MaximumEventAgeInSeconds *int }
	resourceOf(t, tr, "SweepFunctionEventInvokeConfig", "AWS::Lambda::EventInvokeConfig", &cfg)
	var sched struct {
		Target struct {
			RetryPolicy struct{ MaximumRetryAttempts, MaximumEventAgeInSeconds *int }
		}
	}
	names := tr.OfType("AWS::Scheduler::Schedule")
	require.Len(t, names, 1)
	resourceOf(t, tr, names[0], "AWS::Scheduler::Schedule", &sched)
	for _, tc := range []struct {
		what          string
		value         *int
		lowest, upper int
	}{
		{"EventInvokeConfig MaximumEventAgeInSeconds", cfg.MaximumEventAgeInSeconds, 60, 21600},
		{"EventInvokeConfig MaximumRetryAttempts", cfg.MaximumRetryAttempts, 0, 2},
		{"schedule RetryPolicy MaximumEventAgeInSeconds", sched.Target.RetryPolicy.MaximumEventAgeInSeconds, 60, 86400},
		{"schedule RetryPolicy MaximumRetryAttempts", sched.Target.RetryPolicy.MaximumRetryAttempts, 0, 185},
	} {
		require.NotNil(t, tc.value, tc.what)
		require.GreaterOrEqual(t, *tc.value, tc.lowest, tc.what)
		require.LessOrEqual(t, *tc.value, tc.upper, tc.what)
	}
}
