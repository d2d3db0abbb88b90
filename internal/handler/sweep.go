package handler

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// Sweep handles the scheduled invocation: one sweep per call.
type Sweep struct{ rt *Runtime }

// NewSweep returns the sweep handler over rt.
func NewSweep(rt *Runtime) *Sweep { return &Sweep{rt: rt} }

// Handle runs one sweep with the invocation's deadline and returns its
// summary. The event (an EventBridge Scheduler payload, or anything) is not
// read. It fails only when the configuration cannot be safe under this
// deadline — a lease shorter than the timeout — so the Errors alarm fires.
func (s *Sweep) Handle(ctx context.Context, _ json.RawMessage) (telemetry.Summary, error) {
	if deadline, ok := ctx.Deadline(); ok {
		if err := s.rt.Engine.Policy().CheckDeadline(time.Until(deadline)); err != nil {
			s.rt.Log.ErrorContext(ctx, "sweep refused: configuration unsafe for this timeout", "error", err)
			return telemetry.Summary{Function: "sweep"}, err
		}
	}
	// The audit goes first, so the rows it moves are swept in this run.
	audit := s.audit(ctx)
	res, err := s.rt.Engine.Sweep(ctx)
	sum := telemetry.NewSummary("sweep", res)
	// Only rows this run resolved: a row an overlapping audit moved first
	// is that audit's, and a failed move counts when a later run ends it.
	sum.StrayRows = audit.Strays()
	sum.DeadLettered += audit.DeadLettered
	sum.Errors += audit.Errors
	s.rt.report(ctx, sum)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return sum, err
	}
	return sum, nil
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
