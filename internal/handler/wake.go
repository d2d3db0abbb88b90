package handler

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// Wake handles DynamoDB stream batches. It is advisory: whatever it cannot
// do, the next sweep does, so it never fails a batch.
type Wake struct {
	rt  *Runtime
	now func() time.Time
}

// NewWake returns the wake handler over rt.
func NewWake(rt *Runtime) *Wake { return &Wake{rt: rt, now: time.Now} }

// Handle delivers the rows the batch inserted as pending and due, and
// always reports success with no item failures, so Lambda never retries or
// splits a batch on the wake's account.
//
// It applies the sweep's deadline rule first: a lease that does not outlast
// the invocation, or a deadline margin that leaves no time in it, refuses
// the batch with an error log and a summary stopped "refused" (the sweep
// delivers the rows), rather than claim rows it cannot settle in time.
func (w *Wake) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if deadline, ok := ctx.Deadline(); ok {
		if err := w.rt.Engine.Policy().CheckDeadline(time.Until(deadline)); err != nil {
			w.rt.Log.ErrorContext(ctx, "wake refused: configuration unsafe for this timeout; the sweep will deliver the rows", "error", err)
			sum := telemetry.NewSummary("wake", outbox.Result{Stopped: "refused"})
			sum.Records = len(ev.Records)
			w.rt.report(ctx, sum)
			return events.DynamoDBEventResponse{}, nil
		}
	}
	w.rt.publish(ctx, republishEvery)
	refs, ignored := DueInserts(ev, w.now())
	for _, ig := range ignored {
		if ig.Reason != reasonNotDue && ig.Reason != reasonDelayed {
			w.rt.Log.InfoContext(ctx, "wake skipped a stream record", "event_id", ig.EventID, "reason", ig.Reason)
		}
	}
	var res outbox.Result
	if len(refs) > 0 {
		var err error
		res, err = w.rt.Engine.DeliverRefs(ctx, refs)
		if err != nil {
			w.rt.Log.WarnContext(ctx, "wake stopped early; the sweep will deliver the rest", "error", err)
		}
	}
	sum := telemetry.NewSummary("wake", res)
	sum.Records, sum.Ignored = len(ev.Records), len(ignored)
	w.rt.report(ctx, sum)
	return events.DynamoDBEventResponse{}, nil
}

// Ignored is a stream record the wake did not act on, and why.
type Ignored struct {
	EventID string
	Reason  string
}

const (
	reasonNotDue  = "not due yet"
	reasonDelayed = "delayed (not_before): the sweep's"
)

// DueInserts returns the rows a batch inserted as pending, due when
// staged and still due by now, in order, and every other record with the reason it was left alone. Each
// row carries its queue and, from the image, its predecessor in an ordered
// group, so the engine need not read it, and the row itself as inserted
// (DueRef.Image), which the engine may send without a claim. It never
// panics on unexpected records.
func DueInserts(ev events.DynamoDBEvent, now time.Time) (refs []outbox.DueRef, ignored []Ignored) {
	for _, rec := range ev.Records {
		key, reason := dueInsert(rec, now)
		if reason != "" {
			ignored = append(ignored, Ignored{EventID: rec.EventID, Reason: reason})
			continue
		}
		img := rec.Change.NewImage
		ref := outbox.DueRef{Key: key, Image: imageRow(img)}
		ref.Queue, _ = stringAttr(img, dynamo.AttrQueue)
		// A prev of another type leaves the row unlinked: the engine reads
		// it, and the claim dead-letters the malformed row.
		if _, has := img[dynamo.AttrPrev]; !has {
			ref.Linked = true
		} else if prev, ok := stringAttr(img, dynamo.AttrPrev); ok {
			ref.Prev, ref.Linked = prev, true
		}
		if seq, ok := img[dynamo.AttrSeq]; ok && ref.Linked {
			// A place that is not a whole number leaves the row for the
			// engine to read, like a prev of the wrong type.
			n, err := int64(-1), error(nil)
			if seq.DataType() == events.DataTypeNumber {
				n, err = strconv.ParseInt(seq.Number(), 10, 64)
			}
			if err != nil || n < 0 {
				ref.Prev, ref.Linked = "", false
			} else {
				ref.Seq = n
			}
		}
		refs = append(refs, ref)
	}
	return refs, ignored
}

func dueInsert(rec events.DynamoDBEventRecord, now time.Time) (key, reason string) {
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) {
		return "", "not an insert: " + rec.EventName
	}
	img := rec.Change.NewImage
	key, ok := stringAttr(img, dynamo.AttrKey)
	if !ok || key == "" {
		return "", "no string " + dynamo.AttrKey + " in the new image"
	}
	if status, _ := stringAttr(img, dynamo.AttrStatus); status != string(outbox.StatusPending) {
		return "", "status is not pending"
	}
	due, ok := img[dynamo.AttrDueAt]
	if !ok || due.DataType() != events.DataTypeNumber {
		return "", "no numeric " + dynamo.AttrDueAt + " in the new image"
	}
	ms, err := strconv.ParseInt(due.Number(), 10, 64)
	if err != nil {
		return "", dynamo.AttrDueAt + " is not an integer"
	}
	_, indexed := img[dynamo.AttrShard]
	if ms > now.UnixMilli() && indexed {
		return "", reasonNotDue
	}
	// A lean row (no shard) due when staged but not yet by this clock (its
	// producer's clock is ahead) goes on all the same: the engine cannot
	// send it yet, and hands it to the sweep, which no one else would.
	// A row that was not due when staged is never the wake's: the sweep
	// takes it as soon as it is due (it leaves to the wake only rows due
	// when inserted), so a wake reading its record late would race the
	// sweep for it, a refused write DynamoDB bills.
	if created, ok := img[dynamo.AttrCreatedAt]; ok && created.DataType() == events.DataTypeNumber {
		if c, err := strconv.ParseInt(created.Number(), 10, 64); err == nil && ms > c {
			return "", reasonDelayed
		}
	}
	return key, ""
}

// stringAttr reads a string attribute without the panic that
// DynamoDBAttributeValue.String has for other types.
func stringAttr(img map[string]events.DynamoDBAttributeValue, name string) (string, bool) {
	v, ok := img[name]
	if !ok || v.DataType() != events.DataTypeString {
		return "", false
	}
	return v.String(), true
}
