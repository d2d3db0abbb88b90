package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// Sweep handles the scheduled invocation: one sweep per call.
type Sweep struct{ rt *Runtime }

// NewSweep returns the sweep handler over rt.
func NewSweep(rt *Runtime) *Sweep { return &Sweep{rt: rt} }

// Handle runs one sweep with the invocation's deadline and returns its
// summary. An event that names a partition ({"partition": i, "of": k,
// "until": ms}, sent by the fan-out) sweeps that partition's shards. Any
// other event (the schedule's, {"scheduled_time": ...}, or anything) is
// the scheduled sweep: with
// OUTFLOW_SWEEP_PARTITIONS k > 1, it starts partitions 1 to k-1 as
// invocations of their own, runs the stray-row audit and sweeps partition
// 0, and the partitions it could not start; with k = 1, it runs the audit
// and sweeps every shard. It fails only when the sweep cannot be safe — a
// lease shorter than the timeout, a partition event that is not one of
// this function's partitions — so the Errors alarm fires.
func (s *Sweep) Handle(ctx context.Context, event json.RawMessage) (telemetry.Summary, error) {
	k := s.rt.Config.SweepPartitions
	order, err := readSweepEvent(event, k)
	if err == nil {
		err = order.p.Validate(s.rt.Config.Store.Shards)
	}
	if err != nil {
		s.rt.Log.ErrorContext(ctx, "sweep refused: not a partition of this function", "error", err,
			"partitions", k, "shards", s.rt.Config.Store.Shards)
		return telemetry.Summary{Function: "sweep", Stopped: "refused"}, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		if err := s.rt.Engine.Policy().CheckDeadline(time.Until(deadline)); err != nil {
			s.rt.Log.ErrorContext(ctx, "sweep refused: configuration unsafe for this timeout", "error", err)
			return telemetry.Summary{Function: "sweep", Stopped: "refused"}, err
		}
	}
	s.rt.publish(ctx, 0)
	next := order.next(time.Now(), s.rt.Config.SweepRate)
	parts := []outbox.Partition{order.p}
	if order.scheduled && k > 1 {
		parts = append(parts, s.fanOut(ctx, k, next)...)
	}
	// The audit goes first, so the rows it moves to these shards are swept
	// in this run (rows it moves to another partition's shards go in that
	// partition's next sweep); only the scheduled sweep runs it, since it
	// reads the whole index.
	var audit dynamo.AuditResult
	var backstop dynamo.BackstopResult
	if order.scheduled {
		audit = s.audit(ctx, next)
		backstop = s.backstop(ctx, next)
	}
	res, err := s.rt.Engine.SweepPartitions(ctx, next, parts...)
	sum := telemetry.NewSummary("sweep", res)
	if k > 1 {
		sum.Partition = partitionNames(parts)
	}
	// Only rows this run resolved: a row an overlapping audit moved first
	// is that audit's, and a failed move counts when a later run ends it.
	sum.StrayRows = audit.Strays()
	sum.DeadLettered += audit.DeadLettered
	// Each partition this invocation swept besides its own is one it
	// could not start.
	sum.Errors += audit.Errors + backstop.Errors + len(parts) - 1
	sum.MissedRows, sum.MissedRowWaitMs = backstop.Indexed, backstop.LongestWait.Milliseconds()
	sum.DeadLettered += backstop.DeadLettered
	s.rt.report(ctx, sum)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return sum, err
	}
	return sum, nil
}

// sweepOrder is what an event asks of a sweep.
type sweepOrder struct {
	p outbox.Partition
	// scheduled is the schedule's own invocation: partition 0, which
	// starts the others and runs the audit.
	scheduled bool
	// began is when the schedule fired, from the event (EventBridge
	// Scheduler's <aws.scheduler.scheduled-time>, which the template puts
	// in it), or zero.
	began time.Time
	// until is a partition event's stop: the next scheduled sweep's start.
	until time.Time
}

// next is when the next scheduled sweep of these shards begins (zero when
// the schedule's rate is not known): one period after this one's schedule
// fired, however late Lambda's queue delivered the event and however long
// the fan-out took, so a late sweep claims less rather than racing the
// next one.
func (o sweepOrder) next(now time.Time, rate time.Duration) time.Time {
	switch {
	case rate <= 0:
		return time.Time{}
	case !o.until.IsZero():
		return o.until
	case o.scheduled && !o.began.IsZero() && o.began.Before(now):
		return o.began.Add(rate)
	}
	return now.Add(rate)
}

// readSweepEvent reads what an event asks. One that names no partition
// (no "partition" and no "of") is the scheduled sweep: partition 0 of k,
// with the schedule's time if it carries "scheduled_time". One that names
// a partition must name one of this function's k, with whole numbers, and
// an "until" in whole Unix milliseconds if any: anything else is an error,
// never the scheduled sweep (which would fan out a second time).
func readSweepEvent(event json.RawMessage, k int) (sweepOrder, error) {
	var named map[string]json.RawMessage
	if json.Unmarshal(event, &named) != nil || (named["partition"] == nil && named["of"] == nil) {
		o := sweepOrder{p: outbox.Partition{Index: 0, Count: k}, scheduled: true}
		var at string
		if json.Unmarshal(named["scheduled_time"], &at) == nil {
			o.began, _ = time.Parse(time.RFC3339, at)
		}
		return o, nil
	}
	index, ierr := wholeNumber(named["partition"])
	count, cerr := wholeNumber(named["of"])
	var until int
	var uerr error
	if named["until"] != nil {
		until, uerr = wholeNumber(named["until"])
	}
	o := sweepOrder{p: outbox.Partition{Index: index, Count: count}}
	if ierr != nil || cerr != nil || uerr != nil || until < 0 {
		return o, fmt.Errorf("partition event %.200s: want {\"partition\": i, \"of\": k, \"until\": ms} with whole numbers", event)
	}
	if count != k {
		return o, fmt.Errorf("partition event %s: this function sweeps %d partitions (OUTFLOW_SWEEP_PARTITIONS); an event sent before it changed is dropped, its shards go in this function's own partitions", o.p, k)
	}
	if until > 0 {
		o.until = time.UnixMilli(int64(until))
	}
	return o, nil
}

// wholeNumber reads a JSON integer that fits an int: not null, a string,
// a fraction or an exponent.
func wholeNumber(raw json.RawMessage) (int, error) {
	var n int
	if raw == nil || string(raw) == "null" {
		return 0, errors.New("missing")
	}
	return n, json.Unmarshal(raw, &n)
}

// partitionNames lists partitions as the summary shows them, "0/4,2/4".
func partitionNames(ps []outbox.Partition) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.String()
	}
	return strings.Join(names, ",")
}

// fanOutTimeout bounds the fan-out: an asynchronous Invoke only queues the
// event and answers at once, so a slow one is a failing one, and the
// partitions it could not start are swept here instead.
const fanOutTimeout = 2 * time.Second

// fanOut starts partitions 1 to k-1 and returns those it could not start,
// each logged; the scheduled sweep sweeps them itself. One whose Invoke
// went through after all is then swept twice: the claims are conditional,
// so that costs refused writes, never a second send.
func (s *Sweep) fanOut(ctx context.Context, k int, next time.Time) []outbox.Partition {
	if s.rt.Invoker == nil {
		s.rt.Log.ErrorContext(ctx, "sweep partitions not started: no invoker (AWS_LAMBDA_FUNCTION_NAME unset); sweeping them here", "partitions", k)
		var all []outbox.Partition
		for i := 1; i < k; i++ {
			all = append(all, outbox.Partition{Index: i, Count: k})
		}
		return all
	}
	ctx, cancel := context.WithTimeout(ctx, fanOutTimeout)
	defer cancel()
	var until int64
	if !next.IsZero() {
		until = next.UnixMilli()
	}
	failed := fanOut(ctx, s.rt.Invoker, k, until)
	var left []outbox.Partition
	for i := 1; i < k; i++ {
		p := outbox.Partition{Index: i, Count: k}
		if err, ok := failed[p]; ok {
			s.rt.Log.ErrorContext(ctx, "sweep partition not started; sweeping it here", "partition", p.String(), "error", err)
			left = append(left, p)
		}
	}
	return left
}

// audit runs the stray-row audit within its page budget and logs each
// stray row by key and shard (never its payload). The audit is given the
// invocation's time, up to the next scheduled sweep when next is set, less
// the sweep's deadline margin, and takes only its
// share of that (dynamo.Audit.TimeShare), so however many stray rows wait,
// the sweep keeps most of the invocation. A failed audit is logged and
// counted as an error (Errors already counts each failed move); the sweep
// goes on.
func (s *Sweep) audit(ctx context.Context, next time.Time) dynamo.AuditResult {
	if s.rt.Audit == nil {
		return dynamo.AuditResult{}
	}
	ctx, cancel := s.beforeSweep(ctx, next)
	defer cancel()
	res, err := s.rt.Audit.Run(ctx, time.Now())
	for _, f := range res.Found {
		s.rt.Log.WarnContext(ctx, "stray row: its shard is never swept", "key", f.Key, "shard", f.Shard,
			"shards", s.rt.Config.Store.Shards, "outcome", f.Outcome, "error", f.Error)
	}
	if err != nil && ctx.Err() == nil && res.Errors == 0 {
		res.Errors++
		s.rt.Log.WarnContext(ctx, "stray-row audit failed", "error", err)
	}
	return res
}

// beforeSweep bounds work done before the sweep (the audit, the
// backstop) to the invocation's time, up to the next scheduled sweep when
// next is set, less the sweep's deadline margin; each takes only its time
// share of that.
func (s *Sweep) beforeSweep(ctx context.Context, next time.Time) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok && next.IsZero() {
		return context.WithCancel(ctx)
	}
	if !ok || (!next.IsZero() && next.Before(deadline)) {
		deadline = next
	}
	return context.WithDeadline(ctx, deadline.Add(-s.rt.Engine.Policy().DeadlineMargin))
}

// backstop runs the lean backstop within its page budget, after the
// audit, and logs each row it found by key (never its payload): each is
// a row the stream never brought to the wake, now in the due index, which
// this sweep delivers. A failed run is logged and counted as an error;
// the sweep goes on.
func (s *Sweep) backstop(ctx context.Context, next time.Time) dynamo.BackstopResult {
	if s.rt.Backstop == nil {
		return dynamo.BackstopResult{}
	}
	ctx, cancel := s.beforeSweep(ctx, next)
	defer cancel()
	res, err := s.rt.Backstop.Run(ctx, time.Now())
	for _, key := range res.Keys {
		s.rt.Log.WarnContext(ctx, "lean row the stream never delivered: put in the due index", "key", key)
	}
	for _, key := range res.Refused {
		s.rt.Log.WarnContext(ctx, "row with no shard DynamoDB will not index: dead-lettered with the reason", "key", key)
	}
	if res.Ran {
		s.rt.Log.InfoContext(ctx, "backstop", "pages", res.Pages, "scanned", res.Scanned, "read_units", res.ReadUnits,
			"indexed", res.Indexed, "pass_done", res.PassDone)
	}
	if err != nil && ctx.Err() == nil && res.Errors == 0 {
		res.Errors++
		s.rt.Log.WarnContext(ctx, "lean backstop failed", "error", err)
	}
	return res
}
