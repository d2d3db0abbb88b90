package outflow

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// Row is one message to stage.
type Row struct {
	// Key identifies the row and is the idempotency key: staging the same
	// key twice stages it once. Leave it empty to get a new ULID. It is
	// sent as the outflow.key attribute and, on FIFO queues, as the
	// deduplication id, so it must be 1-128 printable ASCII characters.
	Key string
	// Queue is the route name. Names ending in ".fifo" route to FIFO
	// queues or topics and need a Group.
	Queue string
	// Payload is the message body, sent byte for byte when it is text SQS
	// accepts, base64-encoded (with outflow.encoding=base64) otherwise. On
	// an EventBridge route it must be a JSON object: the event's detail,
	// with Outflow's outflow member added.
	Payload []byte
	// Attributes become String message attributes: at most 8 (7 for a
	// binary payload; one less each on an ordered route), with valid SQS names outside the outflow. prefix,
	// the TraceParent among them. On an EventBridge route, "source" and
	// "detail-type" name the event's; the others travel in the event's
	// outflow member.
	Attributes map[string]string
	// Group is the FIFO message group: required on a route whose name
	// ends in ".fifo", refused on any other (ErrGroupNotFIFO), where it
	// would order nothing.
	Group string
	// NotBefore delays delivery until then; zero means now.
	NotBefore time.Time
	// TraceParent is the W3C trace context the message carries to its
	// consumer, stored as the "traceparent" attribute. Put and
	// TransactItems fill an empty one from their context (TraceParent
	// says how); TransactItem, which has no context, leaves it as given.
	// One from the context is left out when the row would not be valid
	// with it (no attribute left for it, or no room in the size limit).
	TraceParent string
}

// Validation errors. Every error Validate returns wraps exactly one of
// these; so does every validation error of Put, TransactItem and
// TransactItems, which check a row against its route's target (the
// target ones come from the same checks the dispatcher applies).
var (
	ErrEmptyQueue        = errors.New("queue is empty")
	ErrInvalidKey        = errors.New("invalid key")
	ErrEmptyPayload      = target.ErrEmptyPayload
	ErrPayloadTooLarge   = target.ErrTooLarge
	ErrTooManyAttributes = target.ErrTooManyAttributes
	ErrAttributeName     = target.ErrAttributeName
	ErrAttributeValue    = target.ErrAttributeValue
	ErrGroupRequired     = target.ErrGroupRequired
	ErrInvalidGroup      = target.ErrInvalidID
	// ErrGroupNotFIFO is returned for a row with a Group whose route is
	// not FIFO (its name does not end in .fifo: a standard SQS queue, fair
	// queues among them, a standard SNS topic, an EventBridge bus). The
	// dispatcher sends no message group to such a target, so the row
	// would be delivered in no order; outflow enqueue refuses the same.
	ErrGroupNotFIFO = errors.New("only a FIFO queue or topic has message groups")
	// ErrKeyConflict is returned by Put, and by Classify and Transact for
	// a canceled transaction, when the key is already staged with
	// different content.
	ErrKeyConflict = errors.New("key already staged with different content")
	// ErrItemTooLarge is returned by Put and TransactItem when the row's
	// item, with the room its delivery state needs, would pass DynamoDB's
	// item size limit.
	ErrItemTooLarge = dynamo.ErrItemTooLarge
	// ErrOrderedRoute is returned by TransactItem for a row of an ordered
	// route, which TransactItems stages.
	ErrOrderedRoute = errors.New("ordered route")
	// ErrDuplicateKey is returned by TransactItems and Transact for two
	// rows with one key: a transaction writes an item once.
	ErrDuplicateKey = errors.New("key given twice")
	// ErrTooManyItems is returned by TransactItems and Transact when the
	// rows' items (a put per row, an update per ordered group), with your
	// own, would pass MaxTransactItems.
	ErrTooManyItems = errors.New("too many items for one transaction")
	// ErrNotStaged is returned by Put for a row of an ordered group that
	// was not staged because an earlier row of its group failed.
	ErrNotStaged = errors.New("not staged")
	// ErrGroupRace is returned by Put when other producers kept staging
	// into the same ordered group first, every time it tried; and by
	// Classify and Transact when another producer staged into the group
	// after TransactItems read its tail (build the items again and retry).
	ErrGroupRace = dynamo.ErrGroupRace
	// ErrNoRoute is returned for a row whose queue is not one of the
	// routes given in Config.Routes. The error lists them, and where they
	// are the ones Published.Apply read, names the table the dispatcher
	// published them in.
	ErrNoRoute = errors.New("no such route")
	// ErrNotJSON is returned for a row bound for an EventBridge route
	// whose payload is not a JSON object, as an event's detail must be.
	ErrNotJSON = target.ErrNotJSON
	// ErrEventField is returned for a row bound for an EventBridge route
	// with no source or detail-type (from its attributes or the route's
	// options), or one EventBridge refuses.
	ErrEventField = target.ErrEventField
)

// MaxOwnAttributes is how many attributes a row for an SQS queue or an SNS
// topic may carry: SQS allows 10, and Outflow sends outflow.key and
// outflow.attempt with every message. An event carries its attributes in
// its detail, without a count of its own.
const MaxOwnAttributes = target.MaxAttributes - 2

// MaxOrderedAttributes is how many attributes a row of an ordered route
// may carry: its message also carries its place in the group
// (outflow.seq), for consumers to check the group's order, and keeps room
// for outflow.redriven, which a copy sent after an operator's redrive
// carries so that a consumer joining the group where it is seen
// (JoinWhereSeen) does not start the group at a place sent out of turn.
// Its size is checked with that mark too.
const MaxOrderedAttributes = MaxOwnAttributes - 2

// maxSeq stands in for a row's place when an ordered row's size is
// checked before it has one: the widest place there can be.
const maxSeq = math.MaxInt64

// Validate reports the first reason the row cannot be staged to an SQS
// queue, if any. maxBytes caps the message size (0: the dispatcher's
// default, 256 KiB). It checks the row as unordered: a Producer checks a
// row of a route in Config.Ordered with one attribute less
// (MaxOrderedAttributes), and a producer given Config.Routes checks each
// row against its route's own target.
func (r Row) Validate(maxBytes int) error {
	return r.validate(target.Target{Kind: target.KindSQS, FIFO: outbox.FIFORoute(r.Queue)}, maxBytes, false)
}

// validate reports the first reason the row cannot be staged for t, on an
// ordered route if ordered.
func (r Row) validate(t target.Target, maxBytes int, ordered bool) error {
	if strings.TrimSpace(r.Queue) == "" {
		return ErrEmptyQueue
	}
	if r.Key != "" && !target.ValidID(r.Key) {
		return fmt.Errorf("%w: %q must be 1-128 printable ASCII characters without spaces", ErrInvalidKey, r.Key)
	}
	if r.Group != "" && !outbox.FIFORoute(r.Queue) {
		return fmt.Errorf("group %q: route %q is not FIFO (its name does not end in .fifo), and %w; drop the group", r.Group, r.Queue, ErrGroupNotFIFO)
	}
	attrs, err := r.attributes()
	if err != nil {
		return err
	}
	most, seq := MaxOwnAttributes, int64(0)
	if ordered {
		most, seq = MaxOrderedAttributes, maxSeq
	}
	if len(attrs) > most && t.Kind != target.KindEventBridge {
		return fmt.Errorf("%w: %d given, at most %d", ErrTooManyAttributes, len(attrs), most)
	}
	key := r.Key
	if key == "" {
		key = "01ARZ3NDEKTSV4RRFFQ69G5FAV" // a ULID stands in for the key to be generated
	}
	// The size is checked with the widest attempt number any budget
	// allows: outflow.attempt grows with the attempt, and a message that
	// fits only at attempt 1 would be refused as permanent at attempt 10.
	// An ordered row's place is checked the same way, at its widest.
	var redriven time.Time
	if ordered {
		redriven = time.UnixMilli(1) // sized as a redriven copy, with its mark
	}
	return target.Validate(outbox.Row{
		Key: key, Queue: r.Queue, Payload: r.Payload, Attributes: attrs, Group: r.Group, Attempt: outbox.MaxAttemptsLimit, Seq: seq,
		RedrivenAt: redriven,
	}, t, maxBytes)
}

// attributes is the row's attributes as stored: Attributes with the
// TraceParent added, after checking the trace context is one.
func (r Row) attributes() (map[string]string, error) {
	tp := r.TraceParent
	if v, ok := r.Attributes[outbox.AttrTraceParent]; ok {
		if err := target.ValidTraceParent(v); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrAttributeValue, err)
		}
		if tp != "" && tp != v {
			return nil, fmt.Errorf("%w: the %s attribute and TraceParent differ", ErrAttributeValue, outbox.AttrTraceParent)
		}
		tp = v
	}
	if tp == "" {
		return r.Attributes, nil
	}
	if err := target.ValidTraceParent(tp); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAttributeValue, err)
	}
	attrs := maps.Clone(r.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs[outbox.AttrTraceParent] = tp
	return attrs, nil
}
