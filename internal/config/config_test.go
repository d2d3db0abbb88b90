package config_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func minimal() map[string]string {
	return map[string]string{"OUTFLOW_TABLE": "outbox", "OUTFLOW_ROUTES": "orders=https://sqs.us-east-1.amazonaws.com/1/orders"}
}

func TestLoad_AppliesDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(minimal()))
	require.NoError(t, err)
	require.Equal(t, "outbox", c.Store.Table)
	require.Equal(t, 4, c.Store.Shards)
	require.Equal(t, 8, c.Policy.MaxAttempts)
	require.Equal(t, 5*time.Minute, c.Policy.Lease)
	require.Equal(t, 15*time.Second, c.Policy.WakeGrace)
	require.Equal(t, 262144, c.MaxMessageBytes)
	require.Equal(t, "Outflow", c.MetricsNamespace)
	require.Equal(t, "https://sqs.us-east-1.amazonaws.com/1/orders", c.Routes["orders"])
	require.False(t, c.Lean)
	require.Equal(t, 4, c.BackstopPages)
	require.Zero(t, c.BackstopDrain, "for ever")
}

func TestLoad_DefaultsMatchTheEngineDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(minimal()))
	require.NoError(t, err)
	// Compared as loaded: every field, WakeGrace too (set here before, it
	// hid a difference in the very value compared).
	require.Equal(t, outbox.DefaultPolicy(), c.Policy)
}

func TestLoad_ReadsEveryVariable(t *testing.T) {
	t.Parallel()
	kv := minimal()
	kv["OUTFLOW_SHARDS"] = "16"
	kv["OUTFLOW_DONE_RETENTION"] = "24h"
	kv["OUTFLOW_MAX_ATTEMPTS"] = "3"
	kv["OUTFLOW_BACKOFF_BASE"] = "250ms"
	kv["OUTFLOW_BACKOFF_MULTIPLIER"] = "3"
	kv["OUTFLOW_BACKOFF_MAX"] = "1m"
	kv["OUTFLOW_JITTER"] = "0"
	kv["OUTFLOW_LEASE"] = "2m"
	kv["OUTFLOW_WAKE_GRACE"] = "7s"
	kv["OUTFLOW_PAGE_SIZE"] = "50"
	kv["OUTFLOW_CONCURRENCY"] = "8"
	kv["OUTFLOW_DEADLINE_MARGIN"] = "5s"
	kv["OUTFLOW_ROW_BUDGET"] = "500"
	kv["OUTFLOW_BATCH_LINGER"] = "0s"
	kv["OUTFLOW_MAX_MESSAGE_BYTES"] = "393216"
	kv["OUTFLOW_FUNCTION_TIMEOUT"] = "1m"
	kv["OUTFLOW_METRICS_NAMESPACE"] = "Mine"
	kv["OUTFLOW_ROUTES"] += ",a.fifo=https://sqs.us-east-1.amazonaws.com/1/a.fifo,b.fifo=https://sqs.us-east-1.amazonaws.com/1/b.fifo"
	kv["OUTFLOW_ORDERED"] = " a.fifo , b.fifo=skip "
	kv["OUTFLOW_HEAD_WAIT"] = "500ms"
	kv["OUTFLOW_SWEEP_PARTITIONS"] = "16"
	kv["OUTFLOW_SWEEP_RATE"] = "rate(2 minutes)"
	kv["OUTFLOW_LEAN"] = "true"
	kv["OUTFLOW_BACKSTOP_PAGES"] = "12"
	kv["OUTFLOW_BACKSTOP_DRAIN"] = "36h"
	c, err := config.Load(env(kv))
	require.NoError(t, err)
	require.Equal(t, 16, c.SweepPartitions)
	require.Equal(t, 2*time.Minute, c.SweepRate)
	require.Equal(t, map[string]outbox.DeadHead{"a.fifo": outbox.DeadHeadBlock, "b.fifo": outbox.DeadHeadSkip}, c.Policy.Ordered)
	require.Equal(t, 500*time.Millisecond, c.Policy.HeadWait)
	require.Equal(t, 16, c.Store.Shards)
	require.Equal(t, 24*time.Hour, c.Store.DoneRetention)
	p := c.Policy
	require.True(t, c.Lean)
	require.Equal(t, 12, c.BackstopPages)
	require.Equal(t, 36*time.Hour, c.BackstopDrain)
	require.Equal(t, []any{3, 250 * time.Millisecond, 3, time.Minute, 0.0, 2 * time.Minute, 7 * time.Second, 50, 8, 5 * time.Second, 500, time.Duration(0)},
		[]any{p.MaxAttempts, p.BackoffBase, p.BackoffMultiplier, p.BackoffMax, p.Jitter, p.Lease, p.WakeGrace, p.PageSize, p.Concurrency, p.DeadlineMargin, p.RowBudget, p.BatchLinger})
	require.Equal(t, 393216, c.MaxMessageBytes)
	require.Equal(t, time.Minute, c.FunctionTimeout)
	require.Equal(t, "Mine", c.MetricsNamespace)
	require.Len(t, config.Vars, len(kv), "every variable is covered here")
}

func TestLoad_InvalidValueNamesVariableAndValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value, want string
	}{
		{"OUTFLOW_TABLE", "", "OUTFLOW_TABLE is required"},
		{"OUTFLOW_ROUTES", "", "OUTFLOW_ROUTES is required"},
		{"OUTFLOW_ROUTES", "orders", `OUTFLOW_ROUTES="orders": route "orders": want name=target`},
		{"OUTFLOW_ROUTES", "orders=sqs.example/1/orders", `is not a queue URL, a topic ARN or an event bus ARN or name`},
		{"OUTFLOW_SHARDS", "four", `OUTFLOW_SHARDS="four": not an integer`},
		{"OUTFLOW_SHARDS", "0", "OUTFLOW_SHARDS=0: must be in [1, 1000]"},
		{"OUTFLOW_DONE_RETENTION", "-1h", "OUTFLOW_DONE_RETENTION=-1h0m0s: must not be negative"},
		{"OUTFLOW_MAX_ATTEMPTS", "0", "OUTFLOW_MAX_ATTEMPTS=0: must be at least 1"},
		{"OUTFLOW_BACKOFF_BASE", "soon", `OUTFLOW_BACKOFF_BASE="soon": not a duration`},
		{"OUTFLOW_BACKOFF_BASE", "0s", "OUTFLOW_BACKOFF_BASE=0s: must be positive"},
		{"OUTFLOW_BACKOFF_MULTIPLIER", "0", "OUTFLOW_BACKOFF_MULTIPLIER=0: must be at least 1"},
		{"OUTFLOW_BACKOFF_MAX", "1ms", "OUTFLOW_BACKOFF_MAX=1ms: must be at least the backoff base"},
		{"OUTFLOW_JITTER", "1.5", "OUTFLOW_JITTER=1.5: must be in [0, 1)"},
		{"OUTFLOW_JITTER", "lots", `OUTFLOW_JITTER="lots"`},
		{"OUTFLOW_LEASE", "0s", "OUTFLOW_LEASE=0s: must be positive"},
		{"OUTFLOW_WAKE_GRACE", "-1s", "OUTFLOW_WAKE_GRACE=-1s: must not be negative"},
		{"OUTFLOW_PAGE_SIZE", "5000", "OUTFLOW_PAGE_SIZE=5000: must be in [1, 1000]"},
		{"OUTFLOW_CONCURRENCY", "0", "OUTFLOW_CONCURRENCY=0: must be in [1, 256]"},
		{"OUTFLOW_DEADLINE_MARGIN", "-1s", "OUTFLOW_DEADLINE_MARGIN=-1s: must not be negative"},
		{"OUTFLOW_ROW_BUDGET", "0", "OUTFLOW_ROW_BUDGET=0: must be at least 1"},
		{"OUTFLOW_BATCH_LINGER", "x", `OUTFLOW_BATCH_LINGER="x": not a duration`},
		{"OUTFLOW_MAX_MESSAGE_BYTES", "2000000", "OUTFLOW_MAX_MESSAGE_BYTES=2000000: must be in [1024, 393216]"},
		// SQS accepts 1 MiB, but no DynamoDB item can hold such a row.
		{"OUTFLOW_MAX_MESSAGE_BYTES", "1048576", "OUTFLOW_MAX_MESSAGE_BYTES=1048576: must be in [1024, 393216], what a DynamoDB item can carry"},
		{"OUTFLOW_MAX_ATTEMPTS", "1001", "OUTFLOW_MAX_ATTEMPTS=1001: must be at most 1000"},
		{"OUTFLOW_BACKOFF_MAX", "876000h", "OUTFLOW_BACKOFF_MAX=876000h0m0s: must be at most 8760h0m0s"},
		{"OUTFLOW_FUNCTION_TIMEOUT", "soon", `OUTFLOW_FUNCTION_TIMEOUT="soon": not a duration`},
		{"OUTFLOW_FUNCTION_TIMEOUT", "-1s", "OUTFLOW_FUNCTION_TIMEOUT=-1s: must not be negative"},
		{"OUTFLOW_FUNCTION_TIMEOUT", "5m", "OUTFLOW_FUNCTION_TIMEOUT=5m0s: lease (5m0s) must be longer than the invocation timeout (5m0s)"},
		{"OUTFLOW_FUNCTION_TIMEOUT", "10s", "OUTFLOW_FUNCTION_TIMEOUT=10s: deadline margin (10s) must be shorter than the invocation timeout (10s)"},
		{"OUTFLOW_HEAD_WAIT", "2m", "OUTFLOW_HEAD_WAIT=2m0s: must be in [0, 1m0s]"},
		{"OUTFLOW_ORDERED", "orders", `OUTFLOW_ORDERED="orders": route "orders": only FIFO routes`},
		{"OUTFLOW_ORDERED", "a.fifo=later", `OUTFLOW_ORDERED="a.fifo=later": route "a.fifo": dead-head policy "later" must be block or skip`},
		{"OUTFLOW_ORDERED", "a.fifo,a.fifo=skip", `route "a.fifo": given twice`},
		{"OUTFLOW_ORDERED", "a.fifo", `OUTFLOW_ORDERED: route "a.fifo" is not in OUTFLOW_ROUTES`},
		// Each partition sweeps shards of its own: more partitions than
		// shards would leave one with nothing, and say nothing about why.
		{"OUTFLOW_SWEEP_PARTITIONS", "5", "OUTFLOW_SWEEP_PARTITIONS=5: must be in [1, OUTFLOW_SHARDS=4]: each partition sweeps shards of its own"},
		{"OUTFLOW_SWEEP_PARTITIONS", "0", "OUTFLOW_SWEEP_PARTITIONS=0: must be in [1, OUTFLOW_SHARDS=4]"},
		{"OUTFLOW_SWEEP_PARTITIONS", "two", `OUTFLOW_SWEEP_PARTITIONS="two": not an integer`},
		{"OUTFLOW_SWEEP_RATE", "rate(1 hour)", `OUTFLOW_SWEEP_RATE="rate(1 hour)": not a rate in minutes`},
		{"OUTFLOW_SWEEP_RATE", "rate(0 minutes)", `OUTFLOW_SWEEP_RATE="rate(0 minutes)": not a rate in minutes`},
		{"OUTFLOW_SWEEP_RATE", "-1m", `OUTFLOW_SWEEP_RATE="-1m": not a duration`},
		{"OUTFLOW_SWEEP_RATE", "10s", "OUTFLOW_SWEEP_RATE=10s: must exceed OUTFLOW_DEADLINE_MARGIN=10s"},
		{"OUTFLOW_LEAN", "yes", `OUTFLOW_LEAN="yes": not true or false`},
		{"OUTFLOW_LEAN", "on", `OUTFLOW_LEAN="on": not true or false`},
		{"OUTFLOW_BACKSTOP_PAGES", "0", "OUTFLOW_BACKSTOP_PAGES=0: must be in [1, 100]"},
		{"OUTFLOW_BACKSTOP_PAGES", "101", "OUTFLOW_BACKSTOP_PAGES=101: must be in [1, 100]"},
		{"OUTFLOW_BACKSTOP_PAGES", "four", `OUTFLOW_BACKSTOP_PAGES="four": not an integer`},
		{"OUTFLOW_BACKSTOP_DRAIN", "-1h", "OUTFLOW_BACKSTOP_DRAIN=-1h0m0s: must not be negative"},
		{"OUTFLOW_BACKSTOP_DRAIN", "a week", `OUTFLOW_BACKSTOP_DRAIN="a week": not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			kv := minimal()
			kv[tt.name] = tt.value
			_, err := config.Load(env(kv))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// Values the template allows together (a 30 s lease, a linger just under
// it) would leave each AWS call (lease − linger) / 3, a millisecond: no call
// could finish. Load refuses them, naming the variable and the lease.
func TestLoad_RefusesACallTimeoutNoCallCanMeet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, lease, linger string
		want                string
	}{
		{"linger just under the lease", "30s", "29999ms", "OUTFLOW_BATCH_LINGER=29.999s: must be at most the lease (30s) less 3s"},
		{"calls of just under a second", "3s", "1ms", "OUTFLOW_BATCH_LINGER=1ms: must be at most the lease (3s) less 3s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{
				"OUTFLOW_TABLE": "t", "OUTFLOW_ROUTES": "orders=https://sqs.us-east-1.amazonaws.com/1/orders",
				"OUTFLOW_LEASE": tt.lease, "OUTFLOW_BATCH_LINGER": tt.linger, "OUTFLOW_FUNCTION_TIMEOUT": "2s",
				"OUTFLOW_DEADLINE_MARGIN": "1s",
			}
			c, err := config.Load(func(k string) string { return env[k] })
			require.ErrorContains(t, err, tt.want, "accepted, with a per-call timeout of %s", c.Policy.CallTimeout())
		})
	}
}

func TestDefaultDoneRetentionIsTheStoresOne(t *testing.T) {
	t.Parallel()
	for _, v := range config.Vars {
		if v.Name == "OUTFLOW_DONE_RETENTION" {
			d, err := time.ParseDuration(v.Default)
			require.NoError(t, err)
			require.Equal(t, dynamo.DefaultDoneRetention, d, "one figure for the idempotency window")
			return
		}
	}
	t.Fatal("OUTFLOW_DONE_RETENTION is not among the variables")
}

// A lean row is in no due index: only its stream record brings it to the
// wake, and the backstop finds it a pass of the table later when that
// fails. With the wake off (a grace of 0s) every lean row would wait that
// long, so Load refuses the pair, naming both variables.
func TestLoad_RefusesLeanWithoutTheWake(t *testing.T) {
	t.Parallel()
	kv := minimal()
	kv["OUTFLOW_LEAN"] = "true"
	kv["OUTFLOW_WAKE_GRACE"] = "0s"
	_, err := config.Load(env(kv))
	require.ErrorContains(t, err, "OUTFLOW_LEAN=true needs the wake: OUTFLOW_WAKE_GRACE=0s says it is off")

	kv["OUTFLOW_LEAN"] = "false"
	c, err := config.Load(env(kv))
	require.NoError(t, err, "not lean, the wake may be off")
	require.False(t, c.Lean)
}

// The bounds hold at their ends: a page a sweep, a hundred, and a drain of
// 0s (the backstop stops as soon as lean is off).
func TestLoad_AcceptsTheBackstopBounds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pages, drain string
		wantPages    int
		wantDrain    time.Duration
	}{
		{"1", "0s", 1, 0},
		{"100", "8760h", 100, 8760 * time.Hour},
		{" 7 ", " 90m ", 7, 90 * time.Minute},
	} {
		kv := minimal()
		kv["OUTFLOW_BACKSTOP_PAGES"], kv["OUTFLOW_BACKSTOP_DRAIN"] = tt.pages, tt.drain
		c, err := config.Load(env(kv))
		require.NoError(t, err, "pages %q, drain %q", tt.pages, tt.drain)
		require.Equal(t, tt.wantPages, c.BackstopPages)
		require.Equal(t, tt.wantDrain, c.BackstopDrain)
	}
}

// The variables' defaults are the backstop's own (dynamo.NewBackstop), so
// a function and a test that builds the backstop directly run alike.
func TestDefaultBackstopBudgetIsTheBackstopsOne(t *testing.T) {
	t.Parallel()
	defaults := map[string]string{}
	for _, v := range config.Vars {
		defaults[v.Name] = v.Default
	}
	require.Equal(t, strconv.Itoa(dynamo.DefaultBackstopPages), defaults["OUTFLOW_BACKSTOP_PAGES"])
	d, err := time.ParseDuration(defaults["OUTFLOW_BACKSTOP_DRAIN"])
	require.NoError(t, err)
	require.Equal(t, dynamo.DefaultBackstopDrain, d)
	require.Equal(t, "false", defaults["OUTFLOW_LEAN"], "lean only when asked for")
}

// The published configuration carries the mode: producers that load it
// stage lean rows only for a dispatcher that runs the backstop.
func TestPublished_CarriesLean(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(minimal()))
	require.NoError(t, err)
	require.False(t, c.Published().Lean)
	kv := minimal()
	kv["OUTFLOW_LEAN"] = "true"
	c, err = config.Load(env(kv))
	require.NoError(t, err)
	require.True(t, c.Published().Lean)
}
