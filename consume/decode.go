package consume

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/target"
)

// groupAttribute is the SQS system attribute that holds a FIFO message's
// group.
const groupAttribute = string(types.MessageSystemAttributeNameMessageGroupId)

// received is an SQS message as both clients give it.
type received struct {
	id, receipt, body string
	// source is the queue ARN Lambda names, if any.
	source string
	// queue is the queue's ARN or URL when known: it, not the message,
	// says whether the queue keeps an order.
	queue string
	// attrs are the String and Number message attributes.
	attrs map[string]string
	// group is the MessageGroupId system attribute.
	group string
}

// FromLambda decodes a record of the SQS event Lambda gives a function
// subscribed to a queue.
func FromLambda(m events.SQSMessage) (Message, error) {
	r := received{id: m.MessageId, receipt: m.ReceiptHandle, body: m.Body, source: m.EventSourceARN, queue: m.EventSourceARN,
		group: m.Attributes[groupAttribute], attrs: make(map[string]string, len(m.MessageAttributes))}
	for k, v := range m.MessageAttributes {
		if v.StringValue != nil {
			r.attrs[k] = *v.StringValue
		}
	}
	return decode(r)
}

// FromSQS decodes a message ReceiveMessage returned, from a queue it does
// not know: a MessageGroupId is taken to mean a FIFO queue. A fair queue,
// a standard queue whose messages carry groups, keeps no order, so prefer
// FromQueue, which the Poller uses. Ask for MessageAttributeNames "All"
// (Outflow's attributes are message attributes), and on a FIFO queue for
// the MessageGroupId system attribute, which an ordered message's Inbox
// items need.
func FromSQS(m types.Message) (Message, error) {
	return fromSQS("", m)
}

// FromQueue decodes a message ReceiveMessage returned from the queue at
// queueURL. Whether the message keeps an order is the queue's to say: on
// a queue that is not FIFO (a standard queue subscribed to a FIFO topic,
// a fair queue) the message has no group and no place, whatever group it
// carries, and is applied unordered.
func FromQueue(queueURL string, m types.Message) (Message, error) {
	return fromSQS(queueURL, m)
}

// fromSQS reads an SDK message from queue, "" when unknown.
func fromSQS(queue string, m types.Message) (Message, error) {
	r := received{queue: queue, attrs: make(map[string]string, len(m.MessageAttributes))}
	if m.MessageId != nil {
		r.id = *m.MessageId
	}
	if m.ReceiptHandle != nil {
		r.receipt = *m.ReceiptHandle
	}
	if m.Body != nil {
		r.body = *m.Body
	}
	r.group = m.Attributes[groupAttribute]
	for k, v := range m.MessageAttributes {
		if v.StringValue != nil {
			r.attrs[k] = *v.StringValue
		}
	}
	return decode(r)
}

// envelope holds the members of an SNS envelope and of an EventBridge
// event that tell them apart and that Decode reads.
type envelope struct {
	// SNS's.
	Type              string                  `json:"Type"`
	TopicArn          string                  `json:"TopicArn"`
	Message           *string                 `json:"Message"`
	MessageAttributes map[string]snsAttribute `json:"MessageAttributes"`
	// EventBridge's.
	DetailType *string         `json:"detail-type"`
	Source     string          `json:"source"`
	Detail     json.RawMessage `json:"detail"`
}

// snsAttribute is a message attribute in SNS's envelope.
type snsAttribute struct {
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

// eventMeta is the outflow member of an event's detail.
type eventMeta struct {
	Key         string            `json:"key"`
	Attempt     int               `json:"attempt"`
	Redriven    bool              `json:"redriven"`
	TraceParent string            `json:"traceparent"`
	Attributes  map[string]string `json:"attributes"`
}

// unordered reports whether the message came from a queue known to keep
// no order: one that is not FIFO. SQS names a FIFO queue's ARN and URL
// with the .fifo suffix, and it is the only kind that delivers a group
// in order.
func (r received) unordered() bool {
	return r.queue != "" && !strings.HasSuffix(r.queue, ".fifo")
}

// decode reads a message as a queue route's (Outflow's attributes on the
// message itself), else as an SNS envelope, else as an EventBridge event.
func decode(r received) (Message, error) {
	if _, ok := r.attrs[target.AttrKey]; ok {
		return fromAttributes(r, EnvelopeSQS, "")
	}
	var env envelope
	if err := json.Unmarshal([]byte(r.body), &env); err != nil {
		return Message{}, &DecodeError{MessageID: r.id, Err: ErrNotOutflow,
			Reason: "no " + target.AttrKey + " attribute, and the body is not an SNS envelope or an EventBridge event"}
	}
	switch {
	case env.Type == "Notification" && env.Message != nil:
		// The envelope's MessageGroupId is never the group: a FIFO queue
		// gives the group itself (the system attribute), and on a
		// standard queue the envelope's group promises an order the
		// queue does not keep.
		inner := received{id: r.id, receipt: r.receipt, body: *env.Message, source: env.TopicArn, queue: r.queue, group: r.group,
			attrs: make(map[string]string, len(env.MessageAttributes))}
		for k, v := range env.MessageAttributes {
			if v.Type == "String" || v.Type == "Number" {
				inner.attrs[k] = v.Value
			}
		}
		if _, ok := inner.attrs[target.AttrKey]; !ok {
			return Message{}, &DecodeError{MessageID: r.id, Envelope: EnvelopeSNS, Err: ErrNotOutflow, Reason: "the SNS message has no " + target.AttrKey + " attribute"}
		}
		return fromAttributes(inner, EnvelopeSNS, env.TopicArn)
	case env.DetailType != nil && len(env.Detail) > 0:
		return fromEvent(r, env)
	}
	return Message{}, &DecodeError{MessageID: r.id, Err: ErrNotOutflow,
		Reason: "no " + target.AttrKey + " attribute, and the body is not an SNS envelope or an EventBridge event"}
}

// fromAttributes reads a message whose body is the payload and whose
// attributes are Outflow's and the row's: a queue route's, or an SNS
// topic's.
func fromAttributes(r received, env Envelope, route string) (Message, error) {
	bad := func(format string, args ...any) (Message, error) {
		return Message{}, &DecodeError{MessageID: r.id, Envelope: env, Err: ErrMalformed, Reason: fmt.Sprintf(format, args...)}
	}
	if route == "" {
		route = r.source
	}
	m := Message{Key: r.attrs[target.AttrKey], Route: route, Group: r.group, Envelope: env,
		MessageID: r.id, ReceiptHandle: r.receipt, Attributes: map[string]string{}}
	if m.Key == "" {
		return bad("%s is empty", target.AttrKey)
	}
	attempt, err := strconv.Atoi(r.attrs[target.AttrAttempt])
	if err != nil || attempt < 1 {
		return bad("%s must be a whole number from 1", target.AttrAttempt)
	}
	m.Attempt = attempt
	if v, ok := r.attrs[target.AttrSeq]; ok {
		if m.Seq, err = strconv.ParseInt(v, 10, 64); err != nil || m.Seq < 1 {
			return bad("%s must be a whole number from 1", target.AttrSeq)
		}
	}
	if r.unordered() {
		m.Group, m.Seq = "", 0
	}
	// Any value marks a redriven row: Outflow sends "1".
	_, m.Redriven = r.attrs[target.AttrRedriven]
	if v, ok := r.attrs[target.AttrClosed]; ok {
		if v == "" {
			return bad("%s is empty", target.AttrClosed)
		}
		m.Closed = v
	}
	switch enc, ok := r.attrs[target.AttrEncoding]; {
	case !ok:
		m.Payload = []byte(r.body)
	case enc == "base64":
		if m.Payload, err = base64.StdEncoding.DecodeString(r.body); err != nil {
			return bad("the body is not the base64 %s says", target.AttrEncoding)
		}
	default:
		return bad("unknown %s %q", target.AttrEncoding, enc)
	}
	for k, v := range r.attrs {
		switch {
		case k == target.AttrTraceParent:
			m.TraceParent = v
		case !strings.HasPrefix(strings.ToLower(k), "outflow."):
			m.Attributes[k] = v
		}
	}
	return m, nil
}

// fromEvent reads an EventBridge event a rule sent to the queue: the
// detail holds Outflow's member beside the payload's own.
func fromEvent(r received, env envelope) (Message, error) {
	fail := func(err error, format string, args ...any) (Message, error) {
		return Message{}, &DecodeError{MessageID: r.id, Envelope: EnvelopeEventBridge, Err: err, Reason: fmt.Sprintf(format, args...)}
	}
	raw, payload, err := splitDetail(env.Detail)
	if err != nil {
		return fail(ErrNotOutflow, "%v", err)
	}
	if raw == nil {
		return fail(ErrNotOutflow, "the event's detail has no %s member", target.MemberOutflow)
	}
	var meta eventMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fail(ErrMalformed, "the detail's %s member: %v", target.MemberOutflow, err)
	}
	if meta.Key == "" {
		return fail(ErrMalformed, "the detail's %s.key is empty", target.MemberOutflow)
	}
	if meta.Attempt < 1 {
		return fail(ErrMalformed, "the detail's %s.attempt must be a whole number from 1", target.MemberOutflow)
	}
	group := r.group
	if r.unordered() {
		group = ""
	}
	m := Message{Key: meta.Key, Group: group, Attempt: meta.Attempt, Redriven: meta.Redriven, Payload: payload, TraceParent: meta.TraceParent,
		Envelope: EnvelopeEventBridge, MessageID: r.id, ReceiptHandle: r.receipt, Attributes: map[string]string{}}
	for k, v := range meta.Attributes {
		m.Attributes[k] = v
	}
	m.Attributes[target.AttrSource] = env.Source
	m.Attributes[target.AttrDetailType] = *env.DetailType
	return m, nil
}

// splitDetail parts an event's detail, a JSON object, into its outflow
// member (nil if it has none) and the object of its other members, as
// the event carries them.
func splitDetail(detail []byte) (outflow json.RawMessage, payload []byte, err error) {
	dec := json.NewDecoder(bytes.NewReader(detail))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("the event's detail is not a JSON object")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	members := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("the event's detail: %w", err)
		}
		name, _ := tok.(string) // a member's name is a string in a valid object
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("the event's detail: %w", err)
		}
		if name == target.MemberOutflow {
			outflow = v
			continue
		}
		if members > 0 {
			b.WriteByte(',')
		}
		members++
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(name); err != nil {
			return nil, nil, fmt.Errorf("the event's detail: %w", err)
		}
		b.Truncate(b.Len() - 1) // Encode ends with a newline
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return outflow, b.Bytes(), nil
}
