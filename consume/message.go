package consume

import (
	"errors"
	"fmt"
)

// Message is one outbox row as its consumer receives it, whichever way it
// travelled.
type Message struct {
	// Key is the row's key: unique per row, the same on every copy.
	Key string
	// Route says where the message came from, as far as it tells: the
	// topic ARN of an SNS envelope, else the queue ARN of a Lambda record;
	// empty for an SDK message or an EventBridge event. Outflow does not
	// send the route's name (it would cost an attribute).
	Route string
	// Group is the FIFO message group, empty on a standard queue.
	Group string
	// Seq is the row's place in its ordered group, from 1; 0 for a row of
	// an unordered route.
	Seq int64
	// Closed is set on a message that is no row but the place of one that
	// will not come: "dead-letter" for a row dead-lettered on a route
	// whose groups go past their dead letters (skip), "purged" for a dead
	// letter an operator purged. Key and Seq are the row's; the payload
	// is no row's. Inbox.Close records it and moves the group's cursor
	// past the place; Handler and Poller give it to their Closed hook,
	// never to Apply. (ClosedRestaged is recorded by an Inbox for a place
	// it closes itself; no message carries it.)
	Closed string
	// Attempt is the delivery attempt that sent this copy, from 1.
	Attempt int
	// Redriven is set on a row an operator redrove from Outflow's dead
	// letters (the outflow.redriven attribute, or redriven in an event's
	// outflow member): it keeps its place, but may come after its group
	// went past it. An Inbox never lets such a row settle where a group
	// it joined part-way through starts (see JoinWhereSeen). A message
	// closing a redriven row's place carries it too. Outflow leaves the
	// mark off a message whose attributes or size have no room
	// for it, so its absence proves nothing.
	Redriven bool
	// Payload is the row's payload as staged, decoded from base64 when
	// Outflow encoded it. For an EventBridge event it is the event's
	// detail without the outflow member Outflow added, its members as the
	// event carries them.
	Payload []byte
	// Attributes are the row's own attributes, without Outflow's
	// (outflow.*) and without the traceparent. For an EventBridge event
	// they include the event's source and detail-type.
	Attributes map[string]string
	// TraceParent is the W3C trace context the row was staged under, if
	// any.
	TraceParent string
	// Envelope says which way the message travelled.
	Envelope Envelope
	// MessageID and ReceiptHandle are SQS's, for the message as received:
	// a redelivered copy has the same MessageID, a second send another.
	MessageID, ReceiptHandle string
}

// ClosedRestaged is the reason an Inbox records for a place it closed
// itself: the place of a key this consumer applied at an earlier place,
// which Outflow staged again (a producer's retry that came after the
// delivered row's retention). The key's effect is applied once; its new
// place is closed so its group goes on.
const ClosedRestaged = "restaged"

// Ordered reports whether the message has a place in an ordered group.
func (m Message) Ordered() bool { return m.Seq > 0 }

// Envelope is the way a message reached the consumer's queue.
type Envelope string

// The envelopes Decode reads. An SNS topic's message with raw message
// delivery arrives exactly as a queue route's does, so it reads as
// EnvelopeSQS.
const (
	EnvelopeSQS         Envelope = "sqs"
	EnvelopeSNS         Envelope = "sns"
	EnvelopeEventBridge Envelope = "eventbridge"
)

// Decoding errors: every error the decoders return is a *DecodeError
// wrapping one of them.
var (
	// ErrNotOutflow is for a message that does not come from Outflow:
	// no outflow.key attribute, SNS envelope or EventBridge event with an
	// outflow member.
	ErrNotOutflow = errors.New("not a message Outflow sent")
	// ErrMalformed is for a message that looks like Outflow's but cannot
	// be read: a key that is empty, an attempt or place that is not a
	// positive whole number, a body that is not the base64 it says.
	ErrMalformed = errors.New("malformed Outflow message")
)

// DecodeError says why a message could not be decoded.
type DecodeError struct {
	// MessageID is SQS's id of the message.
	MessageID string
	// Envelope is the envelope the message was read as, if known.
	Envelope Envelope
	// Reason says what is wrong, without the payload.
	Reason string
	// Err is ErrNotOutflow or ErrMalformed.
	Err error
}

// Error implements error.
func (e *DecodeError) Error() string {
	env := ""
	if e.Envelope != "" {
		env = " (" + string(e.Envelope) + ")"
	}
	return fmt.Sprintf("message %s%s: %v: %s", e.MessageID, env, e.Err, e.Reason)
}

// Unwrap returns ErrNotOutflow or ErrMalformed.
func (e *DecodeError) Unwrap() error { return e.Err }
