package handler

import (
	"context"
	"encoding/json"
	"errors"
	"time"

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
	res, err := s.rt.Engine.Sweep(ctx)
	sum := telemetry.NewSummary("sweep", res)
	s.rt.report(ctx, sum)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return sum, err
	}
	return sum, nil
}
