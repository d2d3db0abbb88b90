// Package config reads Outflow's settings from OUTFLOW_* environment
// variables, once, at cold start. Every variable has a documented default
// except the table and the routes; an invalid value is an error that names
// the variable and the value.
package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Prefix starts every variable Outflow reads.
const Prefix = "OUTFLOW_"

// Config is everything a function needs to run the engine.
type Config struct {
	Store           dynamo.Config
	Routes          delivery.Routes
	Policy          outbox.Policy
	MaxMessageBytes int
	// FunctionTimeout is this function's timeout, when the deployment
	// says it; 0 when it does not, and the deadline is checked at each
	// invocation only.
	FunctionTimeout time.Duration
	// MetricsNamespace is the CloudWatch namespace of the EMF metrics.
	MetricsNamespace string
	// SweepPartitions is how many sweeps share the due index, each over
	// its own shards (outbox.Partition); 1 is a single sweep.
	SweepPartitions int
	// SweepRate is the sweep schedule's period: a sweep stops claiming
	// before the next one of its partition starts. 0 when not given.
	SweepRate time.Duration
	// Lean is OUTFLOW_LEAN: producers stage unordered rows due at once
	// outside the due index, and the sweep runs the backstop that finds
	// the ones the stream missed (dynamo.Backstop).
	Lean bool
	// BackstopPages is the backstop's Scan pages per scheduled sweep;
	// BackstopDrain how long it keeps running after lean was last on.
	BackstopPages int
	BackstopDrain time.Duration
}

// Var describes one environment variable: its name, its default ("" when
// required) and what it means. Vars lists them all; the table in docs/configuration.md and
// the template test are checked against it.
type Var struct {
	Name    string
	Default string
	Doc     string
	set     func(*Config, string) error
	// field is the outbox.Policy or dynamo.Config field the variable
	// sets, so range errors from those layers name the variable.
	field string
}

// Vars is every variable Outflow reads, in documentation order.
var Vars = []Var{
	{"OUTFLOW_TABLE", "", "Outbox table name (required).", func(c *Config, v string) error {
		c.Store.Table = v
		return nil
	}, "Table"},
	{"OUTFLOW_ROUTES", "", "Queue routes, `name=queueURL,...` (required). A row whose queue has no route is retried with backoff (counted in UnroutedRows) and dead-lettered only when its attempts are spent. The functions publish these, with the ordered routes, shards and size limit, in the table (docs/published-config.md).", func(c *Config, v string) (err error) {
		c.Routes, err = delivery.ParseRoutes(v)
		if err == nil && len(c.Routes) == 0 {
			err = errors.New("no routes given")
		}
		return err
	}, ""},
	{"OUTFLOW_ORDERED", "none", "FIFO routes whose rows go in staging order per message group, `route[=block|skip],...`: what a dead-lettered head does to its group, `block` (the default: the group waits for a redrive or purge) or `skip` (it moves on). `none` lists no route. Producers list the same routes.", func(c *Config, v string) (err error) {
		c.Policy.Ordered, err = ParseOrdered(v)
		return err
	}, "Ordered"},
	{"OUTFLOW_HEAD_WAIT", "2s", "How long the wake waits for an ordered row's predecessor in flight in another invocation before it leaves the row to the sweep; 0s never waits. At most 1m.", durVar(func(c *Config) *time.Duration { return &c.Policy.HeadWait }), "HeadWait"},
	{"OUTFLOW_SWEEP_PARTITIONS", "1", "Sweeps that run side by side at each scheduled sweep, each over its own shards (shard s goes to partition s mod this), so no two claim the same row; the scheduled invocation starts the others. At most OUTFLOW_SHARDS.", intVar(func(c *Config) *int { return &c.SweepPartitions }), ""},
	{"OUTFLOW_SWEEP_RATE", "0s", "The sweep schedule's period, as a duration or as the schedule's `rate(N minutes)`: a sweep stops claiming in time for the next one of its partition, so the two never race for rows (every refused claim is a write DynamoDB bills). 0s lets a sweep claim until its deadline margin.", func(c *Config, v string) (err error) {
		c.SweepRate, err = ParseRate(v)
		return err
	}, ""},
	{"OUTFLOW_SHARDS", "4", "Due-index shards. May grow, never shrink; producers must use the same value.", intVar(func(c *Config) *int { return &c.Store.Shards }), "Shards"},
	{"OUTFLOW_DONE_RETENTION", "24h", "Keep delivered rows as `done` this long (TTL), so a producer's retry of a delivered key is recognised as staged rather than staged again; 0 deletes them, and a key delivered can then be staged again.", durVar(func(c *Config) *time.Duration { return &c.Store.DoneRetention }), "DoneRetention"},
	{"OUTFLOW_MAX_ATTEMPTS", "8", "Delivery attempts per row, counting lost claims, before it is dead-lettered.", intVar(func(c *Config) *int { return &c.Policy.MaxAttempts }), "MaxAttempts"},
	{"OUTFLOW_BACKOFF_BASE", "1s", "Delay before the first retry.", durVar(func(c *Config) *time.Duration { return &c.Policy.BackoffBase }), "BackoffBase"},
	{"OUTFLOW_BACKOFF_MULTIPLIER", "2", "Growth of the delay per further attempt.", intVar(func(c *Config) *int { return &c.Policy.BackoffMultiplier }), "BackoffMultiplier"},
	{"OUTFLOW_BACKOFF_MAX", "15m", "Largest delay before jitter.", durVar(func(c *Config) *time.Duration { return &c.Policy.BackoffMax }), "BackoffMax"},
	{"OUTFLOW_JITTER", "0.2", "Spread of each delay, ± this fraction, in [0, 1).", func(c *Config, v string) (err error) {
		c.Policy.Jitter, err = strconv.ParseFloat(v, 64)
		return err
	}, "Jitter"},
	{"OUTFLOW_LEASE", "5m", "How long a claim is exclusive. Must exceed the function timeout; at most 1h.", durVar(func(c *Config) *time.Duration { return &c.Policy.Lease }), "Lease"},
	{"OUTFLOW_WAKE_GRACE", "15s", "The sweep leaves rows younger than this to the stream wake; set 0s when the wake is off.", durVar(func(c *Config) *time.Duration { return &c.Policy.WakeGrace }), "WakeGrace"},
	{"OUTFLOW_PAGE_SIZE", "100", "Due-index entries read per query.", intVar(func(c *Config) *int { return &c.Policy.PageSize }), "PageSize"},
	{"OUTFLOW_CONCURRENCY", "16", "Parallel claims, sends and settles.", intVar(func(c *Config) *int { return &c.Policy.Concurrency }), "Concurrency"},
	{"OUTFLOW_DEADLINE_MARGIN", "10s", "Time kept free before the invocation deadline; unsent claims are released inside it.", durVar(func(c *Config) *time.Duration { return &c.Policy.DeadlineMargin }), "DeadlineMargin"},
	{"OUTFLOW_ROW_BUDGET", "10000", "Most rows one sweep claims.", intVar(func(c *Config) *int { return &c.Policy.RowBudget }), "RowBudget"},
	{"OUTFLOW_BATCH_LINGER", "2s", "Longest a partial SQS batch waits for more rows while claims are still arriving; it goes at once when none are. At most the lease less 3s: each AWS call gets (lease − linger) / 3, at least 1s.", durVar(func(c *Config) *time.Duration { return &c.Policy.BatchLinger }), "BatchLinger"},
	{"OUTFLOW_MAX_MESSAGE_BYTES", "262144", "Size limit of one message and one batch, at most 393216: what a DynamoDB item can carry with Outflow's own attributes (SQS accepts up to 1048576).", intVar(func(c *Config) *int { return &c.MaxMessageBytes }), ""},
	{"OUTFLOW_FUNCTION_TIMEOUT", "0s", "This function's timeout, so init refuses a lease that does not exceed it or a deadline margin that does not fit in it; 0s checks each invocation's deadline only.", durVar(func(c *Config) *time.Duration { return &c.FunctionTimeout }), ""},
	{"OUTFLOW_LEAN", "false", "Lean staging (`true` or `false`), published for producers: unordered rows due at once are staged outside the due index, the stream wake sends and settles each in one write (2 write units a message against 4), and the scheduled sweep runs the backstop, a budgeted Scan of the table that puts rows the stream never delivered into the due index (docs/architecture.md#lean-rows-and-the-backstop). Needs the wake.", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("not true or false")
		}
		c.Lean = b
		return nil
	}, ""},
	{"OUTFLOW_BACKSTOP_PAGES", "4", "Scan pages (up to 1,000 items or 1 MB each) the backstop reads per scheduled sweep, 1 to 100: with the sweep's rate, how long a pass over the table takes, so the longest a row the stream missed waits, and what the backstop costs (docs/cost.md).", intVar(func(c *Config) *int { return &c.BackstopPages }), ""},
	{"OUTFLOW_BACKSTOP_DRAIN", "0s", "How long the backstop keeps running after lean was last on or it last found a row; 0s (the default) keeps it running for ever on a table that has had lean on: producers read the mode when they load the published configuration, so one started before lean was switched off stages lean rows until it restarts, and a row of it the stream loses is found only by the backstop.", durVar(func(c *Config) *time.Duration { return &c.BackstopDrain }), ""},
	{"OUTFLOW_METRICS_NAMESPACE", "Outflow", "CloudWatch namespace of the embedded metrics.", func(c *Config, v string) error {
		c.MetricsNamespace = v
		return nil
	}, ""},
}

func intVar(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("not an integer")
		}
		*field(c) = n
		return nil
	}
}

func durVar(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New("not a duration (like 500ms, 30s, 5m)")
		}
		*field(c) = d
		return nil
	}
}

// Load reads every variable through getenv (os.Getenv in production),
// applies defaults, and validates the result. All problems are reported
// together, each naming its variable.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	var errs []error
	for _, v := range Vars {
		raw := strings.TrimSpace(getenv(v.Name))
		if raw == "" {
			raw = v.Default
		}
		if raw == "" {
			errs = append(errs, fmt.Errorf("%s is required: %s", v.Name, v.Doc))
			continue
		}
		if err := v.set(&c, raw); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", v.Name, raw, err))
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// validate checks ranges; each error names the variable and its value.
func (c Config) validate() error {
	var errs []error
	for _, err := range []error{c.Store.Validate(), c.Policy.Validate()} {
		for _, e := range unjoin(err) {
			var fe *outbox.FieldError
			if errors.As(e, &fe) {
				e = fmt.Errorf("%s=%v: %s", varFor(fe.Field), fe.Value, fe.Msg)
			}
			errs = append(errs, e)
		}
	}
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes > dynamo.MaxMessageBytes {
		errs = append(errs, fmt.Errorf("OUTFLOW_MAX_MESSAGE_BYTES=%d: must be in [1024, %d], what a DynamoDB item can carry", c.MaxMessageBytes, dynamo.MaxMessageBytes))
	}
	for _, route := range sortedRoutes(c.Policy.Ordered) {
		if _, ok := c.Routes[route]; !ok {
			errs = append(errs, fmt.Errorf("OUTFLOW_ORDERED: route %q is not in OUTFLOW_ROUTES", route))
		}
	}
	if c.SweepPartitions < 1 || c.SweepPartitions > c.Store.Shards {
		errs = append(errs, fmt.Errorf("OUTFLOW_SWEEP_PARTITIONS=%d: must be in [1, OUTFLOW_SHARDS=%d]: each partition sweeps shards of its own (raise OUTFLOW_SHARDS, producers too, or lower the partitions)", c.SweepPartitions, c.Store.Shards))
	}
	if c.SweepRate != 0 && c.SweepRate <= c.Policy.DeadlineMargin {
		errs = append(errs, fmt.Errorf("OUTFLOW_SWEEP_RATE=%s: must exceed OUTFLOW_DEADLINE_MARGIN=%s, or no sweep could claim a row", c.SweepRate, c.Policy.DeadlineMargin))
	}
	if c.BackstopPages < 1 || c.BackstopPages > 100 {
		errs = append(errs, fmt.Errorf("OUTFLOW_BACKSTOP_PAGES=%d: must be in [1, 100]", c.BackstopPages))
	}
	if c.BackstopDrain < 0 {
		errs = append(errs, fmt.Errorf("OUTFLOW_BACKSTOP_DRAIN=%s: must not be negative", c.BackstopDrain))
	}
	if c.Lean && c.Policy.WakeGrace <= 0 {
		errs = append(errs, fmt.Errorf("OUTFLOW_LEAN=true needs the wake: OUTFLOW_WAKE_GRACE=%s says it is off, and a lean row only the backstop found would wait a whole pass of the table", c.Policy.WakeGrace))
	}
	switch {
	case c.FunctionTimeout < 0:
		errs = append(errs, fmt.Errorf("OUTFLOW_FUNCTION_TIMEOUT=%s: must not be negative", c.FunctionTimeout))
	case c.FunctionTimeout > 0:
		if err := c.Policy.CheckDeadline(c.FunctionTimeout); err != nil {
			errs = append(errs, fmt.Errorf("OUTFLOW_FUNCTION_TIMEOUT=%s: %w (OUTFLOW_LEASE=%s, OUTFLOW_DEADLINE_MARGIN=%s)",
				c.FunctionTimeout, err, c.Policy.Lease, c.Policy.DeadlineMargin))
		}
	}
	return errors.Join(errs...)
}

// maxRateMinutes is a year: no schedule is slower, and a larger count of
// minutes would overflow a time.Duration.
const maxRateMinutes = 365 * 24 * 60

// ParseRate reads OUTFLOW_SWEEP_RATE: a duration ("90s", "0s"), or an
// EventBridge Scheduler rate in minutes ("rate(1 minute)", "rate(5
// minutes)"), so the template can pass its SweepRate as it is.
func ParseRate(v string) (time.Duration, error) {
	if inner, ok := strings.CutPrefix(strings.TrimSpace(v), "rate("); ok {
		inner, ok = strings.CutSuffix(inner, ")")
		n, unit, _ := strings.Cut(strings.TrimSpace(inner), " ")
		minutes, err := strconv.Atoi(n)
		if !ok || err != nil || minutes < 1 || minutes > maxRateMinutes || (unit != "minute" && unit != "minutes") {
			return 0, errors.New("not a rate in minutes, at most a year (like rate(1 minute), rate(5 minutes))")
		}
		return time.Duration(minutes) * time.Minute, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("not a duration (like 60s) or a rate (like rate(1 minute))")
	}
	return d, nil
}

// ParseOrdered reads OUTFLOW_ORDERED: "none", or routes with an optional
// dead-head policy, "route[=block|skip],...".
func ParseOrdered(v string) (map[string]outbox.DeadHead, error) {
	if strings.TrimSpace(v) == "none" {
		return nil, nil
	}
	ordered := map[string]outbox.DeadHead{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		route, policy, hasPolicy := strings.Cut(part, "=")
		route, dh := strings.TrimSpace(route), outbox.DeadHeadBlock
		if hasPolicy {
			dh = outbox.DeadHead(strings.TrimSpace(policy))
		}
		switch {
		case !outbox.FIFORoute(route):
			return nil, fmt.Errorf("route %q: only FIFO routes (names ending in .fifo) keep an order per group", route)
		case !dh.Valid():
			return nil, fmt.Errorf("route %q: dead-head policy %q must be block or skip", route, dh)
		}
		if _, dup := ordered[route]; dup {
			return nil, fmt.Errorf("route %q: given twice", route)
		}
		ordered[route] = dh
	}
	return ordered, nil
}

func varFor(field string) string {
	for _, v := range Vars {
		if v.field == field {
			return v.Name
		}
	}
	return field
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func sortedRoutes(m map[string]outbox.DeadHead) []string {
	return slices.Sorted(maps.Keys(m))
}
