package stack_test

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/stack"
)

// serviceLimit is the range AWS accepts for the property a parameter sets,
// from the service's API reference.
type serviceLimit struct {
	min, max float64
	// valid, if set, also checks each value (lists, multiples).
	valid func(v float64) bool
	// source names the property and the limit's origin.
	source string
}

// serviceLimits holds every numeric parameter that sets an AWS property.
// The parameters not here feed only Outflow's own variables (checked
// against the code below) or an alarm threshold, which CloudWatch takes as
// any number.
var serviceLimits = map[string]serviceLimit{
	"SweepTimeoutSeconds":       {min: 1, max: 900, source: "Lambda Timeout, 1-900 s"},
	"WakeTimeoutSeconds":        {min: 1, max: 900, source: "Lambda Timeout, 1-900 s"},
	"SweepMemoryMB":             {min: 128, max: 10240, source: "Lambda MemorySize, 128-10240 MB"},
	"WakeMemoryMB":              {min: 128, max: 10240, source: "Lambda MemorySize, 128-10240 MB"},
	"WakeBatchSize":             {min: 1, max: 10000, source: "event source mapping BatchSize, DynamoDB Streams: 1-10000"},
	"WakeBatchWindowSeconds":    {min: 0, max: 300, source: "MaximumBatchingWindowInSeconds, 0-300"},
	"WakeParallelizationFactor": {min: 1, max: 10, source: "ParallelizationFactor, 1-10"},
	"WakeMaxRetryAttempts":      {min: -1, max: 10000, source: "stream MaximumRetryAttempts, -1 (forever) to 10000"},
	// -1 (forever) is valid too, but 0-59 are not: a MinValue below 60
	// would let them through.
	"WakeMaxRecordAgeSeconds": {min: 60, max: 604800, source: "MaximumRecordAgeInSeconds, -1 or 60-604800"},
	"MaxMessageBytes":         {min: 1024, max: 1048576, source: "SQS message size, 1024-1048576 bytes"},
	"LogRetentionDays": {valid: func(v float64) bool {
		return slices.Contains([]float64{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}, v)
	}, min: 1, max: 3653, source: "CloudWatch Logs RetentionInDays, one of its list"},
	// NoSweepAlarm evaluates 2 periods: a period is 10, 20, 30 or a
	// multiple of 60 s, and under an hour the 2 periods fit in a day.
	"NoSweepAlarmPeriodSeconds": {valid: func(v float64) bool {
		return math.Mod(v, 60) == 0 && (v >= 3600 || 2*v <= 86400) && 2*v <= 604800
	}, min: 60, max: 302400, source: "CloudWatch alarm Period and Period x EvaluationPeriods"},
}

// thresholds feed an alarm's Threshold, which CloudWatch takes as any
// number; their bounds are Outflow's own.
var thresholds = []string{"BacklogAlarmThresholdMs", "IteratorAgeAlarmThresholdMs", "BlockedGroupAlarmMinutes"}

func TestTemplate_NumericParametersStayWithinServiceLimits(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for name, p := range tpl.Parameters {
		if p.Type != "Number" {
			continue
		}
		def, err := strconv.ParseFloat(fmt.Sprint(p.Default), 64)
		require.NoError(t, err, name)
		var values []float64
		if len(p.AllowedValues) > 0 {
			for _, v := range p.AllowedValues {
				f, isNumber := v.(float64)
				require.True(t, isNumber, "%s: allowed value %v", name, v)
				values = append(values, f)
			}
			require.Contains(t, values, def, name)
		} else {
			require.NotNil(t, p.MinValue, "%s has no MinValue", name)
			require.NotNil(t, p.MaxValue, "%s has no MaxValue", name)
			require.LessOrEqual(t, *p.MinValue, def, name)
			require.LessOrEqual(t, def, *p.MaxValue, name)
			values = []float64{*p.MinValue, *p.MaxValue}
		}
		lim, isAWS := serviceLimits[name]
		if !isAWS {
			require.True(t, slices.Contains(thresholds, name) || feedsVariable(t, name),
				"%s sets neither an Outflow variable nor an alarm threshold: add its service limit to serviceLimits", name)
			continue
		}
		for _, v := range values {
			require.GreaterOrEqual(t, v, lim.min, "%s allows %v: %s", name, v, lim.source)
			require.LessOrEqual(t, v, lim.max, "%s allows %v: %s", name, v, lim.source)
			if lim.valid != nil {
				require.True(t, lim.valid(v), "%s allows %v: %s", name, v, lim.source)
			}
		}
	}
	for _, name := range []string{"SweepMemoryMB", "WakeMemoryMB"} {
		require.Equal(t, 128.0, *tpl.Parameters[name].MinValue, name)
		require.Equal(t, 10240.0, *tpl.Parameters[name].MaxValue, name)
	}
	// Lambda's ApplicationLogLevel values.
	for _, v := range tpl.Parameters["LogLevel"].AllowedValues {
		require.Contains(t, []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}, v)
	}
}

// feedsVariable reports whether the parameter is read into an OUTFLOW_
// variable of the functions' environment.
func feedsVariable(t *testing.T, name string) bool {
	t.Helper()
	raw := regexp.MustCompile(`(?m)^\s+(OUTFLOW_[A-Z_]+): !Sub "[^"]*\$\{` + name + `\}`)
	return raw.Match(templateText(t))
}

// TestTemplate_EveryValueAParameterAllowsTheCodeAccepts loads each
// variable-feeding parameter at its bounds (the others at their defaults)
// into the functions' configuration: a bound the code refuses would deploy
// a function that cannot start.
func TestTemplate_EveryValueAParameterAllowsTheCodeAccepts(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for name, p := range tpl.Parameters {
		if p.Type != "Number" || !feedsVariable(t, name) {
			continue
		}
		for _, bound := range []*float64{p.MinValue, p.MaxValue} {
			require.NotNil(t, bound, name)
			value := strconv.FormatFloat(*bound, 'f', -1, 64)
			overrides := companions(tpl, name)
			overrides[name] = value
			for _, fn := range []string{"SweepFunction", "WakeFunction"} {
				vars := function(t, load(t, overrides), fn).Environment.Variables
				env := map[string]string{"OUTFLOW_TABLE": "outbox", "OUTFLOW_ROUTES": "orders=http://localhost/1/orders"}
				for k, v := range vars {
					if k != "OUTFLOW_TABLE" && k != "OUTFLOW_ROUTES" {
						env[k] = v
					}
				}
				_, err := config.Load(func(k string) string { return env[k] })
				require.NoError(t, err, "%s: %s=%s", fn, name, value)
			}
		}
	}
}

// companions are the other parameters' values under which a bound of name
// must work. Rules between two parameters are the code's to check, since
// CloudFormation cannot compare them: the backoff base may not exceed the
// largest delay, and the lease must outlast both timeouts, each of which
// must exceed the deadline margin. So a timeout is tried with the longest
// lease and the smallest margin, the margin with the slowest schedule, the
// lease with the shortest timeouts, and
// so on, and the most sweep partitions with the most shards; every other
// parameter keeps its default.
func companions(tpl *stack.Template, name string) map[string]string {
	bound := func(p string, max bool) string {
		v := tpl.Parameters[p].MinValue
		if max {
			v = tpl.Parameters[p].MaxValue
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	}
	switch name {
	case "SweepPartitions":
		// Each partition sweeps shards of its own: K <= Shards.
		return map[string]string{"Shards": bound("Shards", true)}
	case "BackoffBaseSeconds":
		return map[string]string{"BackoffMaxSeconds": bound("BackoffMaxSeconds", true)}
	case "SweepTimeoutSeconds", "WakeTimeoutSeconds":
		return map[string]string{"LeaseSeconds": bound("LeaseSeconds", true), "DeadlineMarginSeconds": bound("DeadlineMarginSeconds", false)}
	case "LeaseSeconds":
		return map[string]string{"SweepTimeoutSeconds": bound("SweepTimeoutSeconds", false), "WakeTimeoutSeconds": bound("WakeTimeoutSeconds", false),
			"DeadlineMarginSeconds": bound("DeadlineMarginSeconds", false)}
	case "DeadlineMarginSeconds":
		// The sweep also stops the margin before the next scheduled sweep.
		return map[string]string{"SweepTimeoutSeconds": bound("SweepTimeoutSeconds", true), "WakeTimeoutSeconds": bound("WakeTimeoutSeconds", true),
			"LeaseSeconds": bound("LeaseSeconds", true), "SweepRate": "rate(5 minutes)"}
	}
	return map[string]string{}
}

// CloudFormation matches AllowedPattern against the whole value.
func TestTemplate_JitterAcceptsOnlyFractionsBelowOne(t *testing.T) {
	t.Parallel()
	p := load(t, nil).Parameters["Jitter"]
	for _, v := range []string{"0", "0.2", "0.25", "0.95", "0.999"} {
		require.NoError(t, p.Allows(v), "Jitter %q must be accepted", v)
	}
	for _, v := range []string{"1", "1.0", "0.", ".5", "-0.1", "2", "abc", "0.2x", "x0.2", " 0.2", ""} {
		require.Error(t, p.Allows(v), "Jitter %q must be refused", v)
	}
}

// TestTemplate_OrderedRoutesAcceptsOnlyWhatTheCodeParses: every value the
// pattern lets through parses as OUTFLOW_ORDERED and loads beside the
// template's routes, and the mistakes CloudFormation can catch are refused
// at deploy time. A route missing from OUTFLOW_ROUTES or given twice is the
// functions' to refuse at init.
func TestTemplate_OrderedRoutesAcceptsOnlyWhatTheCodeParses(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	p := tpl.Parameters["OrderedRoutes"]
	require.Equal(t, "none", p.Default)
	require.Contains(t, p.Description, "FIFO route")
	require.Contains(t, p.Description, "OUTFLOW_ROUTES")
	for _, v := range []string{"none", "events.fifo", "events.fifo=block", "events.fifo=skip"} {
		require.NoError(t, p.Allows(v), "OrderedRoutes %q must be accepted", v)
		overrides := map[string]string{"OrderedRoutes": v}
		for _, fn := range functions {
			env := function(t, load(t, overrides), fn).Environment.Variables
			require.Equal(t, v, env["OUTFLOW_ORDERED"], fn)
			env["OUTFLOW_TABLE"] = "outbox"
			env["OUTFLOW_ROUTES"] = "orders=http://localhost/1/orders,events.fifo=http://localhost/1/events.fifo"
			_, err := config.Load(func(k string) string { return env[k] })
			require.NoError(t, err, "%s: OrderedRoutes=%s", fn, v)
		}
	}
	for _, v := range []string{"a.fifo,b.fifo=skip,c-1_x.fifo=block"} {
		require.NoError(t, p.Allows(v), "OrderedRoutes %q must be accepted", v)
		_, err := config.ParseOrdered(v)
		require.NoError(t, err, v)
	}
	for _, v := range []string{"", "None", "orders", "events.fifo=", "events.fifo=stop", "events.fifo,", ",events.fifo",
		"events.fifo, a.fifo", "events.fifo a.fifo", "none,events.fifo", ".fifo", "events.fifo=block=skip"} {
		require.Error(t, p.Allows(v), "OrderedRoutes %q must be refused", v)
	}
}

// TestTemplate_SweepRateCannotOutrunNoSweepAlarm tries every rate an
// operator might set: each one SweepRate accepts is at most the shortest
// NoSweepAlarm period, so the alarm's two empty periods (more than two
// periods without an invocation) always mean a sweep did not run, with a
// whole interval of slack for a late one.
func TestTemplate_SweepRateCannotOutrunNoSweepAlarm(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	rate := tpl.Parameters["SweepRate"]
	var shortest float64 = math.MaxFloat64
	for _, v := range tpl.Parameters["NoSweepAlarmPeriodSeconds"].AllowedValues {
		f, isNumber := v.(float64)
		require.True(t, isNumber, "%v", v)
		shortest = min(shortest, f)
	}
	period := time.Duration(shortest) * time.Second
	candidates := []string{"cron(0 3 * * ? *)", "rate(1 minutes)", "rate(0 minutes)", "rate(01 minutes)", "rate(2 minute)", "rate(1 hour)", "rate(1 day)", "rate( 1 minute)", "rate(1 minute) "}
	for n := 1; n <= 120; n++ {
		candidates = append(candidates, fmt.Sprintf("rate(%d minutes)", n), fmt.Sprintf("rate(%d hours)", n))
	}
	var accepted []string
	for _, v := range append(candidates, "rate(1 minute)") {
		if rate.Allows(v) != nil {
			continue
		}
		accepted = append(accepted, v)
		interval := rateInterval(t, v)
		require.LessOrEqual(t, interval, period, "SweepRate %q deploys, and NoSweepAlarm (2 x %v) fires on a healthy stack", v, period)
		sched, err := stack.Load(templatePath, withExamples(map[string]string{"SweepRate": v}))
		require.NoError(t, err, v)
		a := alarm(t, sched, "NoSweepAlarm")
		require.LessOrEqual(t, interval, time.Duration(a.EvaluationPeriods-1)*time.Duration(a.Period)*time.Second,
			"%s: NoSweepAlarm's periods, all but one, outlast a sweep interval", v)
	}
	require.ElementsMatch(t, []string{"rate(1 minute)", "rate(2 minutes)", "rate(3 minutes)", "rate(4 minutes)", "rate(5 minutes)"}, accepted)
}

// rateInterval is a rate() expression's interval.
func rateInterval(t *testing.T, expr string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`).FindStringSubmatch(expr)
	require.NotNil(t, m, "%q is a rate()", expr)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(m[2], "s")]
	return time.Duration(n) * unit
}
