package stack_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/stack"
)

// sweepConfig loads the sweep's configuration from the template's
// environment for it, as the function does at init.
func sweepConfig(t *testing.T, tpl *stack.Template) (config.Config, error) {
	t.Helper()
	env := function(t, tpl, "SweepFunction").Environment.Variables
	env["OUTFLOW_TABLE"] = "outbox"
	env["OUTFLOW_ROUTES"] = "orders=http://localhost/1/orders,events.fifo=http://localhost/1/events.fifo"
	return config.Load(func(k string) string { return env[k] })
}

// TestTemplate_SweepPartitionsAndRateReachTheSweep: SweepPartitions is the
// sweep's OUTFLOW_SWEEP_PARTITIONS, and its OUTFLOW_SWEEP_RATE is the
// schedule's own period, whatever SweepRate says, so a sweep stops where
// the next one of its partition starts.
func TestTemplate_SweepPartitionsAndRateReachTheSweep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ partitions, shards, rate string }{
		{"1", "4", "rate(1 minute)"},
		{"2", "4", "rate(3 minutes)"},
		{"4", "4", "rate(5 minutes)"},
		{"1000", "1000", "rate(2 minutes)"},
	} {
		overrides := map[string]string{"SweepPartitions": tc.partitions, "Shards": tc.shards, "SweepRate": tc.rate}
		tpl := load(t, overrides)
		env := function(t, tpl, "SweepFunction").Environment.Variables
		require.Equal(t, tc.partitions, env["OUTFLOW_SWEEP_PARTITIONS"], "%v", overrides)
		require.Equal(t, tc.rate, env["OUTFLOW_SWEEP_RATE"], "%v", overrides)
		cfg, err := sweepConfig(t, tpl)
		require.NoError(t, err, "%v", overrides)
		require.Equal(t, tc.partitions, strconv.Itoa(cfg.SweepPartitions), "%v", overrides)
		var sched stack.ScheduleEvent
		require.NoError(t, function(t, tpl, "SweepFunction").Event("ScheduleV2", &sched))
		require.Equal(t, rateInterval(t, sched.ScheduleExpression), cfg.SweepRate, "%v: the sweep knows its schedule", overrides)
	}
}

// TestTemplate_SweepPartitionsAboveShardsFailTheSweepsInit: CloudFormation
// cannot compare two parameters, so the sweep refuses at init, naming both,
// and the descriptions say what the template cannot check.
func TestTemplate_SweepPartitionsAboveShardsFailTheSweepsInit(t *testing.T) {
	t.Parallel()
	_, err := sweepConfig(t, load(t, map[string]string{"SweepPartitions": "5", "Shards": "4"}))
	require.ErrorContains(t, err, "OUTFLOW_SWEEP_PARTITIONS=5")
	require.ErrorContains(t, err, "OUTFLOW_SHARDS=4")
	p := load(t, nil).Parameters["SweepPartitions"]
	require.Equal(t, "Number", p.Type)
	require.EqualValues(t, 1, p.Default, "one sweep unless asked")
	desc := strings.Join(strings.Fields(p.Description), " ")
	for _, want := range []string{"Must not exceed Shards", "SweepReservedConcurrency", "60 s"} {
		require.Contains(t, desc, want)
	}
	// A reservation below K makes partitions wait, and expire: both
	// parameters say so.
	reservation := strings.Join(strings.Fields(load(t, nil).Parameters["SweepReservedConcurrency"].Description), " ")
	require.Contains(t, reservation, "With SweepPartitions above 1, reserve at least that many")
}

// invokeStatements splits a role's statements into those that grant a
// Lambda action and the rest.
func invokeStatements(stmts []statement) (lambda, rest []statement) {
	for _, s := range stmts {
		if slices.ContainsFunc(s.Action, func(a string) bool { return strings.HasPrefix(a, "lambda:") }) {
			lambda = append(lambda, s)
		} else {
			rest = append(rest, s)
		}
	}
	return lambda, rest
}

// TestTemplate_OnlyAPartitionedSweepMayInvokeItself checks the template and
// its SAM translation: with SweepPartitions above 1 the sweep's role gets
// exactly lambda:InvokeFunction on exactly the sweep function, and nothing
// else changes; with 1 no role holds any Lambda action. The grant follows
// the parameter's text, so it is there whenever the sweep can fan out
// ("01" grants it to a sweep that will not use it, never the reverse).
func TestTemplate_OnlyAPartitionedSweepMayInvokeItself(t *testing.T) {
	t.Parallel()
	for which, get := range map[string]func(map[string]string) *stack.Template{
		"template":    func(o map[string]string) *stack.Template { return load(t, o) },
		"translation": func(o map[string]string) *stack.Template { return translated(t, o) },
	} {
		plain := statements(t, get(map[string]string{"SweepPartitions": "1"}))
		// The schedule's own role (SAM's) invokes the sweep; the
		// functions' roles are the ones checked.
		for _, role := range []string{"SweepRole", "WakeRole"} {
			require.Contains(t, plain, role, which)
			granted, _ := invokeStatements(plain[role])
			require.Empty(t, granted, "%s %s: a Lambda action with one partition", which, role)
		}
		for _, k := range []string{"2", "4", "01"} {
			overrides := map[string]string{"SweepPartitions": k}
			tpl := get(overrides)
			require.True(t, tpl.Conditions["Partitioned"], "%s K=%s", which, k)
			byRole := statements(t, tpl)
			granted, rest := invokeStatements(byRole["SweepRole"])
			require.Len(t, granted, 1, "%s K=%s: one invoke statement", which, k)
			require.Equal(t, "Allow", granted[0].Effect)
			require.Equal(t, []string{"lambda:InvokeFunction"}, granted[0].Action, "%s K=%s", which, k)
			require.Equal(t, []string{"${SweepFunction.Arn}"}, granted[0].Resource, "%s K=%s: the sweep itself, nothing wider", which, k)
			require.Equal(t, plain["SweepRole"], rest, "%s K=%s: the grant changes no other statement", which, k)
			require.Equal(t, plain["WakeRole"], byRole["WakeRole"], "%s K=%s: the wake gets nothing", which, k)
		}
		// The grant is there whenever the code would fan out.
		for _, k := range []string{"1", "01", "2", "3"} {
			tpl := get(map[string]string{"SweepPartitions": k})
			cfg, err := sweepConfig(t, load(t, map[string]string{"SweepPartitions": k}))
			require.NoError(t, err, k)
			granted, _ := invokeStatements(statements(t, tpl)["SweepRole"])
			if cfg.SweepPartitions > 1 {
				require.Len(t, granted, 1, "%s K=%s fans out, so it may invoke", which, k)
			}
		}
	}
}

// TestTemplate_PartitionInvokesKeepTheSchedulesRetryRule: the partitions'
// asynchronous invokes go through the sweep's EventInvokeConfig, which
// template.yaml says so next to: no retries and a short event age, the
// next scheduled sweep being the retry.
func TestTemplate_PartitionInvokesKeepTheSchedulesRetryRule(t *testing.T) {
	t.Parallel()
	tr := translated(t, map[string]string{"SweepPartitions": "2"})
	var cfg struct {
		FunctionName, Qualifier                        string
		MaximumRetryAttempts, MaximumEventAgeInSeconds *int
	}
	resourceOf(t, tr, "SweepFunctionEventInvokeConfig", "AWS::Lambda::EventInvokeConfig", &cfg)
	require.Equal(t, "${SweepFunction}", cfg.FunctionName)
	// The fan-out invokes the unqualified function, which is $LATEST.
	require.Equal(t, "$LATEST", cfg.Qualifier)
	require.NotNil(t, cfg.MaximumRetryAttempts)
	require.Zero(t, *cfg.MaximumRetryAttempts)
	require.NotNil(t, cfg.MaximumEventAgeInSeconds)
	require.Equal(t, 60, *cfg.MaximumEventAgeInSeconds)
	require.Contains(t, strings.Join(strings.Fields(string(templateText(t))), " "), "applies as well to the partitions' asynchronous invokes")
}
