package target

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/outflowhq/outflow/internal/outbox"
)

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

// Event is a row as an EventBridge event: the PutEvents entry's fields,
// and its size as PutEvents counts it.
type Event struct {
	Source, DetailType, Detail string
	// TraceHeader is the row's traceparent in X-Ray's form, if it has one.
	TraceHeader string
	Size        int
}

// eventMeta is the detail's outflow member.
type eventMeta struct {
	Key         string            `json:"key"`
	Attempt     int               `json:"attempt"`
	Redriven    bool              `json:"redriven,omitempty"`
	TraceParent string            `json:"traceparent,omitempty"`
	Attributes  map[string]string `json:"attributes,omitempty"`
}

// NewEvent builds the event for a row bound for t, or says why the row
// cannot be one: its payload is not a JSON object (or has an outflow
// member), it has no source or detail-type, or it is too large.
func NewEvent(row outbox.Row, t Target) (Event, error) {
	if err := checkAttributes(row.Attributes); err != nil {
		return Event{}, err
	}
	attrs := maps.Clone(row.Attributes)
	e := Event{Source: t.Source, DetailType: t.DetailType}
	if v, ok := attrs[AttrSource]; ok {
		e.Source = v
		delete(attrs, AttrSource)
	}
	if v, ok := attrs[AttrDetailType]; ok {
		e.DetailType = v
		delete(attrs, AttrDetailType)
	}
	switch {
	case e.Source == "":
		return Event{}, fmt.Errorf("%w: no source: set the row's %s attribute or the route's %s option", ErrEventField, AttrSource, OptionSource)
	case e.DetailType == "":
		return Event{}, fmt.Errorf("%w: no detail-type: set the row's %s attribute or the route's %s option", ErrEventField, AttrDetailType, OptionDetailType)
	}
	if err := checkSource(e.Source); err != nil {
		return Event{}, err
	}
	if err := checkDetailType(e.DetailType); err != nil {
		return Event{}, err
	}
	meta := eventMeta{Key: row.Key, Attempt: row.Attempt, TraceParent: attrs[AttrTraceParent]}
	delete(attrs, AttrTraceParent)
	if len(attrs) > 0 {
		meta.Attributes = attrs
	}
	detail, err := eventDetail(row.Payload, meta)
	if err != nil {
		return Event{}, err
	}
	e.Detail = detail
	e.TraceHeader, _ = XRayHeader(meta.TraceParent)
	e.Size = len(e.Source) + len(e.DetailType) + len(e.Detail)
	if !row.RedrivenAt.IsZero() {
		// A redriven row's outflow member says so (AttrRedriven), where
		// the event has room for it.
		meta.Redriven = true
		if marked, err := eventDetail(row.Payload, meta); err == nil && e.Size-len(e.Detail)+len(marked) <= MaxEventBytes {
			e.Detail, e.Size = marked, e.Size-len(e.Detail)+len(marked)
		}
	}
	if e.Size > MaxEventBytes {
		return Event{}, fmt.Errorf("%w: %d bytes of source, detail-type and detail, over EventBridge's %d-byte limit", ErrTooLarge, e.Size, MaxEventBytes)
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
