package outflow

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Row is one message to stage.
type Row struct {
	// Key identifies the row and is the idempotency key: staging the same
	// key twice stages it once. Leave it empty to get a new ULID. It is
	// sent as the outflow.key attribute and, on FIFO queues, as the
	// deduplication id, so it must be 1-128 printable ASCII characters.
	Key string
	// Queue is the route name. Names ending in ".fifo" route to FIFO
	// queues and need a Group.
	Queue string
	// Payload is the message body, sent byte for byte when it is text SQS
	// accepts, base64-encoded (with outflow.encoding=base64) otherwise.
	Payload []byte
	// Attributes become String message attributes: at most 8 (7 for a
	// binary payload), with valid SQS names outside the outflow. prefix.
	Attributes map[string]string
	// Group is the FIFO message group.
	Group string
	// NotBefore delays delivery until then; zero means now.
	NotBefore time.Time
}

// Validation errors. Every error Validate returns wraps exactly one of
// these (the SQS ones come from the same checks the dispatcher applies).
var (
	ErrEmptyQueue        = errors.New("queue is empty")
	ErrInvalidKey        = errors.New("invalid key")
	ErrEmptyPayload      = delivery.ErrEmptyPayload
	ErrPayloadTooLarge   = delivery.ErrTooLarge
	ErrTooManyAttributes = delivery.ErrTooManyAttributes
	ErrAttributeName     = delivery.ErrAttributeName
	ErrAttributeValue    = delivery.ErrAttributeValue
	ErrGroupRequired     = delivery.ErrGroupRequired
	ErrInvalidGroup      = delivery.ErrInvalidID
	// ErrKeyConflict is returned by Put, and by Classify and Transact for
	// a canceled transaction, when the key is already staged with
	// different content.
	ErrKeyConflict = errors.New("key already staged with different content")
	// ErrItemTooLarge is returned by Put and TransactItem when the row's
	// item, with the room its delivery state needs, would pass DynamoDB's
	// item size limit.
	ErrItemTooLarge = dynamo.ErrItemTooLarge
	// ErrOrderedRoute is returned by TransactItem for a row of an ordered
	// route, which TransactItems stages, and by Transact for two rows of
	// one ordered group (each would move the group's tail).
	ErrOrderedRoute = errors.New("ordered route")
	// ErrNotStaged is returned by Put for a row of an ordered group that
	// was not staged because an earlier row of its group failed.
	ErrNotStaged = errors.New("not staged")
	// ErrGroupRace is returned by Put when other producers kept staging
	// into the same ordered group first, every time it tried; and by
	// Classify and Transact when another producer staged into the group
	// after TransactItems read its tail (build the items again and retry).
	ErrGroupRace = dynamo.ErrGroupRace
)

// MaxOwnAttributes is how many attributes a row may carry: SQS allows 10,
// and Outflow sends outflow.key and outflow.attempt with every message.
const MaxOwnAttributes = delivery.MaxAttributes - 2

// Validate reports the first reason the row cannot be staged, if any.
// maxBytes caps the message size (0: the dispatcher's default, 256 KiB).
func (r Row) Validate(maxBytes int) error {
	if strings.TrimSpace(r.Queue) == "" {
		return ErrEmptyQueue
	}
	if r.Key != "" && !delivery.ValidID(r.Key) {
		return fmt.Errorf("%w: %q must be 1-128 printable ASCII characters without spaces", ErrInvalidKey, r.Key)
	}
	if len(r.Attributes) > MaxOwnAttributes {
		return fmt.Errorf("%w: %d given, at most %d", ErrTooManyAttributes, len(r.Attributes), MaxOwnAttributes)
	}
	key := r.Key
	if key == "" {
		key = "01ARZ3NDEKTSV4RRFFQ69G5FAV" // a ULID stands in for the key to be generated
	}
	// The size is checked with the widest attempt number any budget
	// allows: outflow.attempt grows with the attempt, and a message that
	// fits only at attempt 1 would be refused as permanent at attempt 10.
	return delivery.Validate(outbox.Row{
		Key: key, Queue: r.Queue, Payload: r.Payload, Attributes: r.Attributes, Group: r.Group, Attempt: outbox.MaxAttemptsLimit,
	}, outbox.FIFORoute(r.Queue), maxBytes)
}
