package telemetry

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Summary is what one invocation did, as returned by the functions, logged,
// and emitted as metrics.
type Summary struct {
	Function       string `json:"function"`
	Claimed        int    `json:"claimed"`
	Delivered      int    `json:"delivered"`
	Retried        int    `json:"retried"`
	DeadLettered   int    `json:"dead_lettered"`
	Released       int    `json:"released"`
	Expired        int    `json:"expired"`
	Skipped        int    `json:"skipped"`
	Conflicts      int    `json:"conflicts"`
	Errors         int    `json:"errors"`
	OldestDueAgeMs int64  `json:"oldest_due_age_ms"`
	// Waiting counts rows of ordered groups left for a later run because
	// their predecessor was not settled; BlockedGroups the ordered groups
	// found held by a dead-lettered row under the block policy, and
	// OldestBlockedAgeMs how long the oldest of those rows had been dead.
	Waiting            int    `json:"waiting"`
	BlockedGroups      int    `json:"blocked_groups"`
	OldestBlockedAgeMs int64  `json:"oldest_blocked_age_ms"`
	DurationMs         int64  `json:"duration_ms"`
	Stopped            string `json:"stopped,omitempty"`
	// Records counts stream records a wake received; Ignored those it
	// could not use (not an insert, not pending, unreadable, not due).
	Records int `json:"records,omitempty"`
	Ignored int `json:"ignored,omitempty"`
	// StrayRows counts the rows the sweep's audit found on a shard the
	// sweep never queries and moved or dead-lettered (see dynamo.Audit),
	// each once: a dead-lettered one counts in DeadLettered too; a failed
	// move counts only in Errors, until a later sweep resolves the row.
	StrayRows int `json:"stray_rows"`
	// UnroutedRows counts failed attempts of rows whose queue this
	// dispatcher has no route for: retried with backoff, dead-lettered
	// only when their budget is spent (each counts in Retried or
	// DeadLettered too). Any is a route missing from OUTFLOW_ROUTES, or a
	// producer writing a queue name no route has.
	UnroutedRows int `json:"unrouted_rows"`
	// UnplacedRows counts rows of a route listed as ordered that were
	// staged with no place in a group, each delivered in no order: a
	// producer that does not list the route as ordered.
	UnplacedRows int `json:"unplaced_rows,omitempty"`
	// Throttled counts DynamoDB writes or reads refused for capacity,
	// settles retried until they applied included; ClaimConcurrency is
	// the least claim concurrency the sweep backed off to (its
	// Concurrency if it never did; 0 for the wake). Unclaimed counts the
	// rows the wake sent without a claim, from their stream images.
	Throttled        int `json:"throttled"`
	ClaimConcurrency int `json:"claim_concurrency,omitempty"`
	Unclaimed        int `json:"unclaimed,omitempty"`
	// HandedOver counts the lean rows the wake sent or left unsent and
	// could not settle, which it put into the due index for the sweep
	// (outbox.Result.Indexed). MissedRows counts the lean rows the
	// backstop found, never delivered by the stream, and put there
	// (dynamo.Backstop), MissedRowWaitMs the age of the oldest of them:
	// how long the stream's miss held it back.
	HandedOver      int   `json:"handed_over,omitempty"`
	MissedRows      int   `json:"missed_rows,omitempty"`
	MissedRowWaitMs int64 `json:"missed_row_wait_ms,omitempty"`
	// Partition is the sweep's share of the due index, "index/count"
	// (outbox.Partition), when the backstop runs as more than one sweep.
	Partition string `json:"partition,omitempty"`
}

// NewSummary summarises an engine result for the named function.
func NewSummary(function string, r outbox.Result) Summary {
	return Summary{
		Function: function, Claimed: r.Claimed, Delivered: r.Delivered, Retried: r.Retried,
		DeadLettered: r.DeadLettered + r.Expired, Released: r.Released, Expired: r.Expired,
		Skipped: r.Skipped, Conflicts: r.Conflicts, Errors: r.Errors,
		OldestDueAgeMs: r.OldestDueAge.Milliseconds(), DurationMs: r.Duration.Milliseconds(), Stopped: r.Stopped,
		Throttled: r.Throttled, ClaimConcurrency: r.ClaimConcurrency, Unclaimed: r.Unclaimed, HandedOver: r.Indexed,
		UnroutedRows: r.Unrouted, UnplacedRows: r.Unplaced, Waiting: r.Waiting, BlockedGroups: r.BlockedGroups, OldestBlockedAgeMs: r.OldestBlockedAge.Milliseconds(),
	}
}

// metric is one EMF metric: its name, unit and value in a Summary.
type metric struct {
	name, unit string
	value      func(Summary) int64
}

var metrics = []metric{
	{"Claimed", "Count", func(s Summary) int64 { return int64(s.Claimed) }},
	{"Delivered", "Count", func(s Summary) int64 { return int64(s.Delivered) }},
	{"Retried", "Count", func(s Summary) int64 { return int64(s.Retried) }},
	{"DeadLettered", "Count", func(s Summary) int64 { return int64(s.DeadLettered) }},
	{"Released", "Count", func(s Summary) int64 { return int64(s.Released) }},
	{"Conflicts", "Count", func(s Summary) int64 { return int64(s.Conflicts) }},
	{"Errors", "Count", func(s Summary) int64 { return int64(s.Errors) }},
	{"OldestDueAgeMs", "Milliseconds", func(s Summary) int64 { return s.OldestDueAgeMs }},
	{"Waiting", "Count", func(s Summary) int64 { return int64(s.Waiting) }},
	{"BlockedGroups", "Count", func(s Summary) int64 { return int64(s.BlockedGroups) }},
	{"OldestBlockedAgeMs", "Milliseconds", func(s Summary) int64 { return s.OldestBlockedAgeMs }},
	{"StrayRows", "Count", func(s Summary) int64 { return int64(s.StrayRows) }},
	{"UnroutedRows", "Count", func(s Summary) int64 { return int64(s.UnroutedRows) }},
	{"UnplacedRows", "Count", func(s Summary) int64 { return int64(s.UnplacedRows) }},
	{"Throttled", "Count", func(s Summary) int64 { return int64(s.Throttled) }},
	{"Unclaimed", "Count", func(s Summary) int64 { return int64(s.Unclaimed) }},
	{"HandedOver", "Count", func(s Summary) int64 { return int64(s.HandedOver) }},
	{"MissedRows", "Count", func(s Summary) int64 { return int64(s.MissedRows) }},
	{"MissedRowWaitMs", "Milliseconds", func(s Summary) int64 { return s.MissedRowWaitMs }},
	{"DurationMs", "Milliseconds", func(s Summary) int64 { return s.DurationMs }},
}

// dimensions is the one dimension set every metric is emitted with: the
// table, so alarms see the sweep and the wake together.
var dimensions = []string{"Table"}

// Dimensions lists the dimension names every metric WriteEMF emits has, for
// alarms, the dashboard and tests.
func Dimensions() []string { return append([]string(nil), dimensions...) }

// MetricNames lists the metrics WriteEMF emits, for alarms and tests.
func MetricNames() []string {
	names := make([]string, len(metrics))
	for i, m := range metrics {
		names[i] = m.name
	}
	return names
}

// WriteEMF writes s as one CloudWatch Embedded Metric Format line to w, in
// namespace, with the table as the only dimension so alarms see the sweep
// and the wake together. DeadLettered includes expired rows. The line
// carries level (see RecordLevel) and an RFC 3339 timestamp, so Lambda's
// log-level filter keeps it: a line without them counts as INFO and is
// dropped at WARN or ERROR, and with it every Outflow metric.
func WriteEMF(w io.Writer, namespace, table, level string, at time.Time, s Summary) error {
	type metricDef struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	defs := make([]metricDef, len(metrics))
	doc := map[string]any{"Table": table, "Function": s.Function,
		LevelKey: level, TimestampKey: at.UTC().Format(time.RFC3339Nano), "msg": s.Function + " metrics"}
	for i, m := range metrics {
		defs[i] = metricDef{Name: m.name, Unit: m.unit}
		doc[m.name] = m.value(s)
	}
	doc["_aws"] = map[string]any{
		"Timestamp": at.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  namespace,
			"Dimensions": [][]string{Dimensions()},
			"Metrics":    defs,
		}},
	}
	line, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode metrics: %w", err)
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
