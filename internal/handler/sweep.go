package handler

import (
	"context"
	"encoding/json"
	"errors"
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
// summary. An event that names a partition ({"partition": i, "of": k},
// sent by the fan-out) sweeps that partition's shards. Any other event (an
// EventBridge Scheduler payload, or anything) is the scheduled sweep: with
// OUTFLOW_SWEEP_PARTITIONS k > 1, it starts partitions 1 to k-1 as
// invocations of their own, runs the stray-row audit and sweeps partition
// 0; with k = 1, it runs the audit and sweeps every shard. It fails only
// when the sweep cannot be safe — a lease shorter than the timeout, a
// partition that does not fit the shards — so the Errors alarm fires.
func (s *Sweep) Handle(ctx context.Context, event json.RawMessage) (telemetry.Summary, error) {
	p, scheduled := partitionOf(event, s.rt.Config.SweepPartitions)
	if err := p.Validate(s.rt.Config.Store.Shards); err != nil {
		s.rt.Log.ErrorContext(ctx, "sweep refused: partition does not fit the shards", "partition", p.String(), "error", err)
		return telemetry.Summary{Function: "sweep", Stopped: "refused"}, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		if err := s.rt.Engine.Policy().CheckDeadline(time.Until(deadline)); err != nil {
			s.rt.Log.ErrorContext(ctx, "sweep refused: configuration unsafe for this timeout", "error", err)
			return telemetry.Summary{Function: "sweep", Stopped: "refused"}, err
		}
	}
	var failedFanOut int
	if scheduled && p.Count > 1 {
		failedFanOut = s.fanOut(ctx, p.Count)
	}
	ctx, cancel := s.untilNextSweep(ctx)
	defer cancel()
	// The audit goes first, so the rows it moves are swept in this run;
	// only the scheduled sweep runs it, since it reads the whole index.
	var audit dynamo.AuditResult
	if scheduled {
		audit = s.audit(ctx)
	}
	res, err := s.rt.Engine.SweepPartition(ctx, p)
	sum := telemetry.NewSummary("sweep", res)
	if p.Count > 1 {
		sum.Partition = p.String()
	}
	// Only rows this run resolved: a row an overlapping audit moved first
	// is that audit's, and a failed move counts when a later run ends it.
	sum.StrayRows = audit.Strays()
	sum.DeadLettered += audit.DeadLettered
	sum.Errors += audit.Errors + failedFanOut
	s.rt.report(ctx, sum)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return sum, err
	}
	return sum, nil
}

// partitionOf reads the partition an event names, or, for any event that
// names none, returns partition 0 of k and scheduled.
func partitionOf(event json.RawMessage, k int) (p outbox.Partition, scheduled bool) {
	var named struct {
		Index *int `json:"partition"`
		Count *int `json:"of"`
	}
	if json.Unmarshal(event, &named) != nil || named.Index == nil || named.Count == nil {
		return outbox.Partition{Index: 0, Count: k}, true
	}
	return outbox.Partition{Index: *named.Index, Count: *named.Count}, false
}

// fanOut starts partitions 1 to k-1 and returns how many it could not
// start, each logged: their shards wait for the next scheduled sweep.
func (s *Sweep) fanOut(ctx context.Context, k int) int {
	if s.rt.Invoker == nil {
		s.rt.Log.ErrorContext(ctx, "sweep partitions not started: no invoker (AWS_LAMBDA_FUNCTION_NAME unset)", "partitions", k)
		return k - 1
	}
	failed := fanOut(ctx, s.rt.Invoker, k)
	for p, err := range failed {
		s.rt.Log.ErrorContext(ctx, "sweep partition not started", "partition", p.String(), "error", err)
	}
	return len(failed)
}

// untilNextSweep ends ctx where the next scheduled sweep of the same
// partition begins, when OUTFLOW_SWEEP_RATE gives the schedule and it
// comes before the invocation's own deadline: the engine stops claiming
// the deadline margin before that, and settles what it holds, so two
// sweeps of one partition never race for the same rows.
func (s *Sweep) untilNextSweep(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.rt.Config.SweepRate <= 0 {
		return ctx, func() {}
	}
	next := time.Now().Add(s.rt.Config.SweepRate)
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(next) {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, next)
}

// audit runs the stray-row audit within its page budget and logs each
// stray row by key and shard (never its payload). The audit is given the
// invocation's time less the sweep's deadline margin, and takes only its
// share of that (dynamo.Audit.TimeShare), so however many stray rows wait,
// the sweep keeps most of the invocation. A failed audit is logged and
// counted as an error (Errors already counts each failed move); the sweep
// goes on.
func (s *Sweep) audit(ctx context.Context) dynamo.AuditResult {
	if s.rt.Audit == nil {
		return dynamo.AuditResult{}
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-s.rt.Engine.Policy().DeadlineMargin))
		defer cancel()
	}
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
