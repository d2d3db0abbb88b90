package consume

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoClosedHook is the reason a Handler or a Poller with no Closed hook
// gives for a message that closes a place: it is reported failed, logged
// at ERROR and counted (ClosingMessagesWithoutHook), never acknowledged
// unread. Before 1.0.0 it was acknowledged unread, and a consumer wired to
// the first documented recipe (an Inbox used inside Apply, no Closed)
// left its group's cursor behind the place for ever, in silence. Set
// Closed to the Inbox's Close, or to AckClosed where the consumer keeps no
// order.
var ErrNoClosedHook = errors.New("a message that closes a place reached a consumer with no Closed hook: " +
	"set Closed to your Inbox's Close, or to consume.AckClosed if this consumer keeps no order")

// AckClosed acknowledges a message that closes a place unread: the Closed
// hook of a consumer that keeps no order (no Inbox, or one under GapPass
// that never waits for a place). It says so in the code, where a nil
// hook said nothing.
func AckClosed(context.Context, Message) error { return nil }

// Outcome is what became of one message a Handler or a Poller was
// given: its OnResult hook hears one per message per delivery, so what
// was skipped is counted where it happened, not re-derived by the user.
type Outcome string

// The outcomes. Applied, Closed, Duplicate and Late are acknowledged
// (deleted, or left out of a batch's failures); Gap, Failed and Skipped
// leave the message to come again.
const (
	// OutcomeApplied is a message whose effect committed (Apply returned
	// nil; under LateApply a late row applied late, too).
	OutcomeApplied Outcome = "applied"
	// OutcomeClosed is a message closing a place that the Closed hook
	// recorded.
	OutcomeClosed Outcome = "closed"
	// OutcomeDuplicate is a message applied before (ErrDuplicate).
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeLate is a message its group went past: recorded, not
	// applied (ErrLate).
	OutcomeLate Outcome = "late"
	// OutcomeGap is a message of an ordered group that is not its
	// group's turn (an *OrderError for a gap, ErrGap).
	OutcomeGap Outcome = "gap"
	// OutcomeFailed is a message that could not be decoded, whose effect
	// failed, or that closes a place and met no Closed hook.
	OutcomeFailed Outcome = "failed"
	// OutcomeSkipped is a message not started: behind a failure or a gap
	// of its FIFO group in the batch, or received as the consumer
	// stopped (ErrSkipped).
	OutcomeSkipped Outcome = "skipped"
)

// Outcomes are every Outcome, in the order Counts and the EMF line list
// them.
var Outcomes = []Outcome{OutcomeApplied, OutcomeClosed, OutcomeDuplicate, OutcomeLate, OutcomeGap, OutcomeFailed, OutcomeSkipped}

// Done reports whether the message is acknowledged: applied, closed, a
// duplicate or late.
func (o Outcome) Done() bool {
	switch o {
	case OutcomeApplied, OutcomeClosed, OutcomeDuplicate, OutcomeLate:
		return true
	}
	return false
}

// Result is what became of one message: OnResult hears one per message
// per delivery.
type Result struct {
	// MessageID is the SQS message id.
	MessageID string
	// Message is the message as decoded; the zero Message when it could
	// not be.
	Message Message
	// Outcome is what became of it.
	Outcome Outcome
	// Err says why, for every outcome but applied and closed (for a
	// duplicate or a late row, the ErrDuplicate or ErrLate Apply gave).
	Err error
}

// Counts adds up Results. Its Add is an OnResult hook (a Handler's or a
// Poller's calls never overlap); read it after Handle returns, or after
// Run does.
type Counts struct {
	Applied, Closed, Duplicate, Late, Gap, Failed, Skipped int
}

// Add counts r.
func (c *Counts) Add(_ context.Context, r Result) {
	*c.field(r.Outcome)++
}

// Of returns the count of one outcome.
func (c *Counts) Of(o Outcome) int { return *c.field(o) }

func (c *Counts) field(o Outcome) *int {
	switch o {
	case OutcomeApplied:
		return &c.Applied
	case OutcomeClosed:
		return &c.Closed
	case OutcomeDuplicate:
		return &c.Duplicate
	case OutcomeLate:
		return &c.Late
	case OutcomeGap:
		return &c.Gap
	case OutcomeSkipped:
		return &c.Skipped
	}
	return &c.Failed
}

// applyMessage gives m to apply, or a message that closes a place to
// closed (an error wrapping ErrNoClosedHook when closed is nil), and
// returns its outcome and the error that decided it. Handler and Poller
// share it, so both acknowledge, and count, the same outcomes.
func applyMessage(ctx context.Context, m Message, apply, closed func(context.Context, Message) error) (Outcome, error) {
	var err error
	switch {
	case m.Closed == "":
		err = apply(ctx, m)
	case closed != nil:
		err = closed(ctx, m)
	default:
		err = fmt.Errorf("message %s, place %d of group %q, closed (%s): %w", m.Key, m.Seq, m.Group, m.Closed, ErrNoClosedHook)
	}
	return outcomeOf(m, err), err
}

// outcomeOf classifies the error applying m gave.
func outcomeOf(m Message, err error) Outcome {
	var order *OrderError
	switch {
	case err == nil && m.Closed != "":
		return OutcomeClosed
	case err == nil:
		return OutcomeApplied
	case errors.Is(err, ErrDuplicate):
		return OutcomeDuplicate
	case errors.Is(err, ErrLate):
		return OutcomeLate
	case errors.As(err, &order) && order.Gap():
		return OutcomeGap
	case errors.Is(err, ErrSkipped):
		return OutcomeSkipped
	}
	return OutcomeFailed
}
