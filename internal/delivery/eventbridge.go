package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// EventBridge's limits, as PutEvents documents them.
const (
	// MaxEventBytes is the most one PutEvents entry, and one request, may
	// hold: source, detail-type and detail, in bytes ("less than 256KB").
	MaxEventBytes = 256*1024 - 1
	// MaxSourceChars and MaxDetailTypeChars bound an entry's source and
	// detail-type.
	MaxSourceChars     = 256
	MaxDetailTypeChars = 128
	// MaxDetailDepth is how deeply PutEvents reads nested JSON.
	MaxDetailDepth = 1000
)

// permanentEventCodes are the entry error codes that name a fault of the
// event itself, which a retry cannot fix. Every other code is retried:
// InternalFailure, ThrottlingException, and the IAM denials
// (AccessDeniedException, NotAuthorizedForSourceException and
// NotAuthorizedForDetailTypeException, an events:source or
// events:detail-type condition), which a fixed policy lets through.
var permanentEventCodes = map[string]bool{
	"MalformedDetail": true,
	"InvalidArgument": true,
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
	if err := checkDetailType(e.detailType); err != nil {
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

// checkSource refuses a source PutEvents refuses: too long, or one kept
// for AWS's own events.
func checkSource(source string) error {
	switch {
	case utf8.RuneCountInString(source) > MaxSourceChars:
		return fmt.Errorf("%w: a source holds at most %d characters", ErrEventField, MaxSourceChars)
	case strings.HasPrefix(source, "aws."):
		return fmt.Errorf("%w: source %q: sources starting with aws. are AWS's own", ErrEventField, source)
	}
	return nil
}

// checkDetailType refuses a detail-type PutEvents refuses.
func checkDetailType(detailType string) error {
	if utf8.RuneCountInString(detailType) > MaxDetailTypeChars {
		return fmt.Errorf("%w: a detail-type holds at most %d characters", ErrEventField, MaxDetailTypeChars)
	}
	return nil
}

// eventDetail is the payload with the outflow member added first, the
// payload's own bytes kept as they are, so rules match on the payload's
// members as written.
func eventDetail(payload []byte, meta eventMeta) (string, error) {
	trimmed := bytes.TrimLeft(payload, " \t\r\n")
	if !utf8.Valid(payload) || len(trimmed) == 0 || trimmed[0] != '{' {
		return "", fmt.Errorf("%w: an EventBridge event's detail must be one", ErrNotJSON)
	}
	members, err := checkDetail(payload)
	if err != nil {
		return "", err
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return "", fmt.Errorf("encode the event's %s member: %w", MemberOutflow, err)
	}
	var b strings.Builder
	b.Grow(len(payload) + len(m) + 16)
	b.WriteString(`{"` + MemberOutflow + `":`)
	b.Write(m)
	if members > 0 {
		b.WriteByte(',')
	}
	b.Write(trimmed[1:])
	return b.String(), nil
}

// checkDetail reads a JSON object as PutEvents will and returns how many
// members it has: it must be one whole JSON value, nested at most
// MaxDetailDepth deep, whose integers fit in 64 bits, without a top-level
// outflow member.
func checkDetail(payload []byte) (int, error) {
	notJSON := func(format string, args ...any) (int, error) {
		return 0, fmt.Errorf("%w: "+format, append([]any{ErrNotJSON}, args...)...)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	members, depth, closed := 0, 0, false
	key := false // the next string is a member name of the top object
	for {
		tok, err := dec.Token()
		switch {
		case err == io.EOF && closed:
			return members, nil
		case err != nil:
			return notJSON("an EventBridge event's detail must be one: %v", err)
		case closed:
			return notJSON("an EventBridge event's detail must be one, with nothing after it")
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
			if depth > MaxDetailDepth {
				return notJSON("nested deeper than the %d levels PutEvents reads", MaxDetailDepth)
			}
			key, closed = depth == 1, depth == 0
			continue
		case string:
			if key {
				members++
				if v == MemberOutflow {
					return notJSON("the payload has a top-level %q member, which Outflow adds to every event", MemberOutflow)
				}
				key = false
				continue
			}
		case json.Number:
			if _, err := v.Int64(); err != nil && !strings.ContainsAny(string(v), ".eE") {
				return notJSON("the integer %s is past the 64-bit range PutEvents accepts", v)
			}
		}
		key = depth == 1 // a value of the top object is read: a name comes next
	}
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
	inBatches(ctx, rows, parts, MaxEventBytes, errs, func(batch []part[types.PutEventsRequestEntry]) {
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
			// The bus answered for the entry: it was not put (Refused).
			err := outbox.Refused(fmt.Errorf("eventbridge refused event: %s: %s", code, aws.ToString(r.ErrorMessage)))
			if permanentEventCodes[code] {
				err = outbox.Permanent(err)
			}
			got[batch[i].id()] = err
		}
		applyAnswers(errs, batch, got, "eventbridge")
	})
}
