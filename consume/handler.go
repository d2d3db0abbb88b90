package consume

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Handler is a Lambda function for an SQS event source mapping with
// ReportBatchItemFailures on: it applies each message of a batch and
// reports the ones to retry.
//
// On a FIFO queue, once a message of a group fails, every later message
// of that group in the batch is reported failed without being applied,
// so the group is retried from its first failure, in order; the other
// groups go on. On a standard queue each message stands alone.
type Handler struct {
	// Apply applies one message. nil, ErrDuplicate (already applied) and
	// ErrLate (recorded, its group went past it) count as done; any other
	// error reports the message failed. It is never given a message that
	// closes a place.
	Apply func(ctx context.Context, m Message) error
	// Closed is given each message that closes a place (Message.Closed: a
	// row dead-lettered under skip, or a dead letter an operator purged),
	// with the same outcomes as Apply. A consumer with an Inbox sets it to
	// the inbox's Close, so its group's cursor moves past the place; one
	// that keeps no order sets AckClosed. Nil reports such a message
	// failed with ErrNoClosedHook, logs it at ERROR and counts it
	// (MetricNoClosedHook): a missing hook is a wiring mistake, and
	// acknowledging the message unread would stall an Inbox's group in
	// silence.
	Closed func(ctx context.Context, m Message) error
	// OnFailure, if set, is told of each message reported failed and why
	// (a *DecodeError for a message that cannot be decoded; ErrSkipped
	// for a FIFO message left behind its group's failure), for logging:
	// the response carries only ids.
	OnFailure func(ctx context.Context, messageID string, err error)
	// OnResult, if set, hears what became of each message of a batch
	// (applied, closed, duplicate, late, gap, failed, skipped), one call
	// at a time, so a consumer counts or logs what it skipped; a Counts's
	// Add is one.
	OnResult func(ctx context.Context, r Result)
	// Logger logs a closing message that met no Closed hook; nil is
	// slog.Default().
	Logger *slog.Logger
	// Metrics receives an EMF line per batch counting its outcomes
	// (namespace MetricNamespace, dimension Queue, one metric per
	// Outcome: Applied, Closed, ...), and one counting each closing
	// message that met no Closed hook (MetricNoClosedHook); nil is
	// os.Stdout, which Lambda reads metrics from.
	Metrics io.Writer
}

// ErrSkipped is the reason given to OnFailure for a message reported
// failed without being applied: an earlier message of its FIFO group
// failed in the same batch, or the invocation's context ended.
var ErrSkipped = errors.New("not applied: an earlier message of its group failed")

// Handle handles one SQS event: pass it to lambda.Start. It returns an
// error, which fails the whole batch, only when Apply is nil (a wiring
// mistake: nothing could be applied). Otherwise a message that cannot be
// decoded is reported failed, for the queue's redrive policy to take it
// to a dead-letter queue, and once the context ends the messages not yet
// applied are reported failed.
func (h Handler) Handle(ctx context.Context, e events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	if h.Apply == nil {
		return resp, errors.New("consume: Handler.Apply is required")
	}
	failedGroups := map[string]bool{}
	var counts Counts
	report := func(rec events.SQSMessage, m Message, o Outcome, err error) {
		counts.Add(ctx, Result{Outcome: o})
		if h.OnResult != nil {
			h.OnResult(ctx, Result{MessageID: rec.MessageId, Message: m, Outcome: o, Err: err})
		}
		if o.Done() {
			return
		}
		id := rec.MessageId
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		loud(ctx, h.Logger, h.Metrics, queueName(rec.EventSourceARN), id, err)
		if h.OnFailure != nil {
			h.OnFailure(ctx, id, err)
		}
	}
	for _, rec := range e.Records {
		// A FIFO queue's group holds its order: the queue decides, not a
		// group id, which a fair queue's messages carry too (a standard
		// queue's messages stand alone).
		group := ""
		if strings.HasSuffix(rec.EventSourceARN, ".fifo") {
			group = rec.Attributes[groupAttribute]
		}
		m, decodeErr := FromLambda(rec)
		if failedGroups[group] && group != "" {
			report(rec, m, OutcomeSkipped, ErrSkipped)
			continue
		}
		if err := ctx.Err(); err != nil {
			report(rec, m, OutcomeSkipped, errors.Join(ErrSkipped, err))
			continue
		}
		o, err := OutcomeFailed, error(decodeErr)
		if decodeErr == nil {
			o, err = applyMessage(ctx, m, h.Apply, h.Closed)
		}
		report(rec, m, o, err)
		if !o.Done() && group != "" {
			failedGroups[group] = true
		}
	}
	if len(e.Records) > 0 {
		countOutcomes(h.Metrics, queueName(e.Records[0].EventSourceARN), counts)
	}
	return resp, nil
}
