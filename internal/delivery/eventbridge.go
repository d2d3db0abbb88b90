package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// EventBridgeAPI is the part of the EventBridge client the deliverer uses.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Row attributes an EventBridge route reads the event's source and
// detail-type from; the route's options give them for rows without.
const (
	AttrSource     = "source"
	AttrDetailType = "detail-type"
)

// MemberOutflow is the member Outflow adds to every event's detail, next to
// the payload's own: the key (for consumers to drop duplicates), the
// attempt, the traceparent and the row's other attributes. A payload may
// not have a member of that name.
const MemberOutflow = "outflow"

// MaxEventBytes is EventBridge's limit on one PutEvents entry and on one
// request: source, detail-type and detail, in bytes.
const MaxEventBytes = 256 * 1024

// permanentEventCodes are the entry error codes that name a fault of the
// event itself, which a retry cannot fix. Every other code (InternalFailure,
// ThrottlingException, an access denial fixed in IAM) is retried.
var permanentEventCodes = map[string]bool{
	"MalformedDetail":                     true,
	"InvalidArgument":                     true,
	"ValidationException":                 true,
	"NotAuthorizedForSourceException":     true,
	"NotAuthorizedForDetailTypeException": true,
}

// event is a row as an EventBridge event.
type event struct {
	source, detailType, detail string
	traceHeader                string
	size                       int
}

// eventMeta is the detail's outflow member.
type eventMeta struct {
	Key         string            `json:"key"`
	Attempt     int               `json:"attempt"`
	TraceParent string            `json:"traceparent,omitempty"`
	Attributes  map[string]string `json:"attributes,omitempty"`
}

// newEvent builds the event for a row bound for t, or says why the row
// cannot be one: its payload is not a JSON object (or has an outflow
// member), it has no source or detail-type, or it is too large.
func newEvent(row outbox.Row, t Target) (event, error) {
	if err := checkAttributes(row.Attributes); err != nil {
		return event{}, err
	}
	attrs := maps.Clone(row.Attributes)
	e := event{source: t.Source, detailType: t.DetailType}
	if v, ok := attrs[AttrSource]; ok {
		e.source = v
		delete(attrs, AttrSource)
	}
	if v, ok := attrs[AttrDetailType]; ok {
		e.detailType = v
		delete(attrs, AttrDetailType)
	}
	switch {
	case e.source == "":
		return event{}, fmt.Errorf("%w: no source: set the row's %s attribute or the route's %s option", ErrEventField, AttrSource, OptionSource)
	case e.detailType == "":
		return event{}, fmt.Errorf("%w: no detail-type: set the row's %s attribute or the route's %s option", ErrEventField, AttrDetailType, OptionDetailType)
	}
	if err := checkSource(e.source); err != nil {
		return event{}, err
	}
	meta := eventMeta{Key: row.Key, Attempt: row.Attempt, TraceParent: attrs[AttrTraceParent]}
	delete(attrs, AttrTraceParent)
	if len(attrs) > 0 {
		meta.Attributes = attrs
	}
	detail, err := eventDetail(row.Payload, meta)
	if err != nil {
		return event{}, err
	}
	e.detail = detail
	e.traceHeader, _ = XRayHeader(meta.TraceParent)
	e.size = len(e.source) + len(e.detailType) + len(e.detail)
	if e.size > MaxEventBytes {
		return event{}, fmt.Errorf("%w: %d bytes of source, detail-type and detail, over EventBridge's %d-byte limit", ErrTooLarge, e.size, MaxEventBytes)
	}
	return e, nil
}

// checkSource refuses a source EventBridge keeps for AWS's own events.
func checkSource(source string) error {
	if strings.HasPrefix(source, "aws.") {
		return fmt.Errorf("%w: source %q: sources starting with aws. are AWS's own", ErrEventField, source)
	}
	return nil
}

// eventDetail is the payload with the outflow member added first, the
// payload's own bytes kept as they are, so rules match on the payload's
// members as written.
func eventDetail(payload []byte, meta eventMeta) (string, error) {
	var members map[string]json.RawMessage
	trimmed := bytes.TrimLeft(payload, " \t\r\n")
	if !utf8.Valid(payload) || len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(payload, &members) != nil {
		return "", fmt.Errorf("%w: an EventBridge event's detail must be one", ErrNotJSON)
	}
	if _, ok := members[MemberOutflow]; ok {
		return "", fmt.Errorf("%w: the payload has a top-level %q member, which Outflow adds to every event", ErrNotJSON, MemberOutflow)
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return "", fmt.Errorf("encode the event's %s member: %w", MemberOutflow, err)
	}
	var b strings.Builder
	b.Grow(len(payload) + len(m) + 16)
	b.WriteString(`{"` + MemberOutflow + `":`)
	b.Write(m)
	if len(members) > 0 {
		b.WriteByte(',')
	}
	b.Write(trimmed[1:])
	return b.String(), nil
}

// toEventBridge puts rows on a bus with PutEvents.
func toEventBridge(ctx context.Context, api EventBridgeAPI, t Target, rows []outbox.Row, errs []error) {
	var parts []part[types.PutEventsRequestEntry]
	for i, row := range rows {
		e, err := newEvent(row, t)
		if err != nil {
			errs[i] = outbox.Permanent(err)
			continue
		}
		entry := types.PutEventsRequestEntry{
			EventBusName: aws.String(t.Address), Source: aws.String(e.source),
			DetailType: aws.String(e.detailType), Detail: aws.String(e.detail),
		}
		if e.traceHeader != "" {
			entry.TraceHeader = aws.String(e.traceHeader)
		}
		parts = append(parts, part[types.PutEventsRequestEntry]{entry: entry, row: i, size: e.size})
	}
	inBatches(parts, MaxEventBytes, func(batch []part[types.PutEventsRequestEntry]) {
		out, err := api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries(batch)})
		if err != nil {
			failBatch(errs, batch, "put events", err)
			return
		}
		// PutEvents answers entry by entry in the order asked, without ids.
		got := answers{}
		for i, r := range out.Entries {
			if i >= len(batch) {
				break
			}
			code := aws.ToString(r.ErrorCode)
			if code == "" {
				got[batch[i].id()] = nil
				continue
			}
			err := fmt.Errorf("eventbridge refused event: %s: %s", code, aws.ToString(r.ErrorMessage))
			if permanentEventCodes[code] {
				err = outbox.Permanent(err)
			}
			got[batch[i].id()] = err
		}
		applyAnswers(errs, batch, got, "eventbridge")
	})
}
