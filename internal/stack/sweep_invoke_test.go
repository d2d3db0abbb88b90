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
