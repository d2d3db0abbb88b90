package target

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Message attribute names Outflow sets on every message. Row attributes may
// not use the "outflow." prefix.
const (
	AttrKey      = "outflow.key"
	AttrAttempt  = "outflow.attempt"
	AttrEncoding = "outflow.encoding"
	// AttrSeq is a row's place in its ordered group (from 1), sent only
	// for a row staged in one, so its consumer can check the group's
	// order: it takes one of the row's attributes.
	AttrSeq = "outflow.seq"
	// AttrClosed marks a message that is no row but the place of one that
	// will not come: a dead letter its group went past (skip), or one an
	// operator purged. Its value says why
	// and names nothing of the payload; the message carries the row's key
	// and place, and a short body. See ClosedBody.
	AttrClosed = "outflow.closed"
	// AttrRedriven marks every copy of a row an operator redrove from the
	// dead letters (its redriven_at is set), with the value RedrivenValue:
	// the row keeps its place, but may come after its group went past it
	// (a skip route's dead letter, whose place a closing message closed),
	// so a consumer joining a group part-way through must not start the
	// group at it. It is sent only where it fits: a row whose own
	// attributes fill SQS's 10, or whose message is within the
	// attribute's bytes of the size limit, goes without it, as it was
	// staged. A message closing a redriven row's place carries it too.
	AttrRedriven = "outflow.redriven"
	// RedrivenValue is the value AttrRedriven carries. Readers take the
	// attribute's presence, whatever its value, for the mark.
	RedrivenValue = "1"
)

// The reasons AttrClosed carries: a dead letter its group went past
// (skip), and one an operator purged.
const (
	ClosedDeadLetter = outbox.ClosedDeadLetter
	ClosedPurged     = outbox.ClosedPurged
)

// ClosedBody is the body of a message that closes a place: SQS and SNS
// refuse an empty one, and a consumer that reads bodies alone sees at
// once that it is no row.
const ClosedBody = `{"outflow":"closed"}`

// Limits of SQS, and of SNS where they are the same.
const (
	// MaxAttributes is the most message attributes SQS accepts, and the
	// most SNS passes on to an SQS subscriber.
	MaxAttributes = 10
	// MaxMessageBytes is the size limit of one message and of one batch,
	// body plus attribute names, types and values. SQS accepts up to 1 MiB
	// today; 256 KiB is what every emulator and older region accepts, so it
	// is the default.
	MaxMessageBytes = 256 * 1024
	// MaxSNSBytes is SNS's limit on one message and on one PublishBatch,
	// counted as SQS counts: whatever MaxMessageBytes is set to, SNS
	// routes keep to it.
	MaxSNSBytes = 256 * 1024
)

// Errors for rows SQS would refuse; each is wrapped with the detail.
var (
	ErrEmptyPayload      = errors.New("empty payload")
	ErrTooManyAttributes = errors.New("too many message attributes")
	ErrAttributeName     = errors.New("invalid message attribute name")
	ErrAttributeValue    = errors.New("invalid message attribute value")
	ErrGroupRequired     = errors.New("a FIFO queue needs a message group")
	ErrInvalidID         = errors.New("invalid FIFO group or deduplication id")
	ErrTooLarge          = errors.New("message too large")
	// ErrNotJSON is for a row bound for EventBridge whose payload is not a
	// JSON object: an event's detail must be one.
	ErrNotJSON = errors.New("payload is not a JSON object")
	// ErrEventField is for a row bound for EventBridge with no source or
	// detail-type, or one EventBridge refuses.
	ErrEventField = errors.New("invalid event field")
)

// Validate reports why the target would refuse row, if it would: the
// checks the deliverer applies before sending, for producers to apply at
// staging. maxBytes 0 means MaxMessageBytes.
func Validate(row outbox.Row, t Target, maxBytes int) error {
	if t.Kind == KindEventBridge {
		_, err := NewEvent(row, t)
		return err
	}
	m, err := NewMessage(row, t.FIFO)
	if err != nil {
		return err
	}
	// A row given as redriven (a producer's row of an ordered route) is
	// checked with its mark: room for it is kept.
	if !row.RedrivenAt.IsZero() && len(m.Attrs) >= MaxAttributes {
		return fmt.Errorf("%w: %d with Outflow's own and %s, SQS allows %d (and SNS passes on)", ErrTooManyAttributes, len(m.Attrs)+1, AttrRedriven, MaxAttributes)
	}
	return m.MarkRedriven(row, math.MaxInt).Fits(SizeLimit(t, maxBytes))
}

// limit is the message size limit maxBytes stands for.
func limit(maxBytes int) int {
	if maxBytes <= 0 {
		return MaxMessageBytes
	}
	return maxBytes
}

// SizeLimit is the limit on one message and one request to a queue or
// topic, maxBytes (0: MaxMessageBytes) and for a topic SNS's own at most,
// and whose it is, as an error names it.
func SizeLimit(t Target, maxBytes int) (int, string) {
	if t.Kind == KindSNS {
		return min(limit(maxBytes), MaxSNSBytes), "SNS's "
	}
	return limit(maxBytes), "the "
}

// Message is a row as SQS and SNS carry it: a text body, message
// attributes, and its size as both count it.
type Message struct {
	Body  string
	Attrs map[string]string // every attribute is a String but attempt and seq, Numbers (AttrType)
	Size  int
	// Group and Dedup are set for a FIFO queue or topic.
	Group, Dedup string
}

// Fits says why the message is over a size limit, if it is.
func (m Message) Fits(limit int, whose string) error {
	if m.Size > limit {
		return fmt.Errorf("%w: %d bytes with attributes, over %s%d-byte limit", ErrTooLarge, m.Size, whose, limit)
	}
	return nil
}

// MarkRedriven returns the message with AttrRedriven added if row was
// redriven and the attribute fits: an eleventh attribute or one past
// limit bytes would make SQS or SNS refuse a row that was valid when it
// was staged, so the message then goes unmarked. A message closing the
// place of a redriven row is marked too: the row failed again after its
// place may have been closed once already, so this second closing
// message may reach a queue subscribed since as its first message of the
// group, and a JoinWhereSeen consumer must start the group there only on
// trial, as at the redriven row itself.
func (m Message) MarkRedriven(row outbox.Row, limit int) Message {
	cost := len(AttrRedriven) + len(AttrType(AttrRedriven)) + len(RedrivenValue)
	if row.RedrivenAt.IsZero() || len(m.Attrs) >= MaxAttributes || m.Size+cost > limit {
		return m
	}
	attrs := make(map[string]string, len(m.Attrs)+1)
	for k, v := range m.Attrs {
		attrs[k] = v
	}
	attrs[AttrRedriven] = RedrivenValue
	m.Attrs, m.Size = attrs, m.Size+cost
	return m
}

// AttrType is the data type of an attribute Outflow sends.
func AttrType(name string) string {
	if name == AttrAttempt || name == AttrSeq {
		return "Number"
	}
	return "String"
}

// NewMessage builds the message for a row, or says why the row cannot be
// one.
func NewMessage(row outbox.Row, fifo bool) (Message, error) {
	if row.Closed != "" {
		// The place of a row that will not come: its key and place, and
		// why, none of its payload or attributes.
		row.Payload, row.Attributes = []byte(ClosedBody), map[string]string{AttrClosed: row.Closed}
	}
	if len(row.Payload) == 0 {
		return Message{}, fmt.Errorf("%w: SQS and SNS need a message body of at least one character", ErrEmptyPayload)
	}
	body, binary := Body(row.Payload)
	attrs := map[string]string{AttrKey: row.Key, AttrAttempt: strconv.Itoa(row.Attempt)}
	if binary {
		attrs[AttrEncoding] = "base64"
	}
	if row.Seq > 0 {
		attrs[AttrSeq] = strconv.FormatInt(row.Seq, 10)
	}
	if err := checkAttributes(row.Attributes); err != nil && row.Closed == "" {
		return Message{}, err
	}
	for k, v := range row.Attributes {
		attrs[k] = v
	}
	if len(attrs) > MaxAttributes {
		return Message{}, fmt.Errorf("%w: %d with Outflow's own, SQS allows %d (and SNS passes on)", ErrTooManyAttributes, len(attrs), MaxAttributes)
	}
	m := Message{Body: body, Attrs: attrs, Size: len(body)}
	for k, v := range attrs {
		m.Size += len(k) + len(AttrType(k)) + len(v)
	}
	if fifo {
		checked := row
		if row.Closed != "" {
			// The closing message's deduplication id is not the key, so
			// a key no deduplication id may be (a space in it, from a
			// producer in another language) does not keep its place
			// from being closed.
			checked.Key = closedDedup(row.Group, row.Key, row.Seq)
		}
		if err := checkFIFO(checked); err != nil {
			return Message{}, err
		}
		m.Group, m.Dedup = row.Group, row.Key
		switch {
		case row.Closed != "":
			m.Dedup = closedDedup(row.Group, row.Key, row.Seq)
		case row.Seq > 0:
			m.Dedup = placedDedup(row.Group, row.Key, row.Seq)
		}
	}
	return m, nil
}

// closedDedup is the deduplication id of the message closing the place
// seq of key's row in group: not the key, which SQS would then refuse for
// 5 minutes to the row itself, redriven; the same for every copy of that
// message, and another for the key closed at another place of any group
// (the key staged again).
func closedDedup(group, key string, seq int64) string {
	return "closed-" + placeHash(group, key) + "#" + strconv.FormatInt(seq, 10)
}

// placedDedup is the deduplication id of a row with a place in an ordered
// group: its group, key and place, hashed. SQS deduplicates across a
// queue's groups, so each is needed. Every send of the row shares it, so
// SQS drops a copy; a key staged again at a new place, of its group or
// another (a producer's retry after the done row was deleted,
// OUTFLOW_DONE_RETENTION under SQS's 5-minute window), has another, so its
// place reaches the consumer, which closes it as restaged, instead of
// being dropped and leaving a gap no message explains.
func placedDedup(group, key string, seq int64) string {
	return "placed-" + placeHash(group, key) + "#" + strconv.FormatInt(seq, 10)
}

// maxID is the longest group or deduplication id SQS takes.
const maxID = 128

// placeHash is the SHA-256 of a group and a key, in hex: 64 characters
// whatever their lengths (each may be 128), and no two pairs alike.
func placeHash(group, key string) string {
	sum := sha256.Sum256([]byte(group + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

// checkAttributes applies the attribute rules every target shares: SQS's
// names and values, outside the outflow. prefix.
func checkAttributes(attrs map[string]string) error {
	for k, v := range attrs {
		if err := attributeName(k); err != nil {
			return err
		}
		if !sqsText([]byte(v)) {
			return fmt.Errorf("%w: %q must be non-empty text of characters SQS allows", ErrAttributeValue, k)
		}
	}
	return nil
}

// checkFIFO checks a row bound for a FIFO queue or topic: it needs a
// group, and its group and key (the deduplication id) must be valid ids.
func checkFIFO(row outbox.Row) error {
	switch {
	case row.Group == "":
		return fmt.Errorf("%w, and the row has none", ErrGroupRequired)
	case !ValidID(row.Group):
		return fmt.Errorf("%w: group %q must be 1-128 ASCII letters, digits or punctuation", ErrInvalidID, row.Group)
	case !ValidID(row.Key):
		return fmt.Errorf("%w: key %q must be 1-128 ASCII letters, digits or punctuation to be a deduplication id", ErrInvalidID, row.Key)
	}
	return nil
}

// Body is the message body for a payload: the payload itself when SQS can
// carry it as text, else its standard base64 encoding (binary reports
// which, and the message then carries outflow.encoding=base64).
func Body(payload []byte) (body string, binary bool) {
	if sqsText(payload) {
		return string(payload), false
	}
	return base64.StdEncoding.EncodeToString(payload), true
}

// sqsText reports whether p is non-empty UTF-8 made only of the characters
// SQS allows in a message body.
func sqsText(p []byte) bool {
	if len(p) == 0 || !utf8.Valid(p) {
		return false
	}
	for _, r := range string(p) {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// attributeName checks SQS's rules for message attribute names, and keeps
// the outflow. prefix for Outflow's own.
func attributeName(name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %q %s", ErrAttributeName, name, why) }
	lower := strings.ToLower(name)
	switch {
	case name == "" || len(name) > 256:
		return bad("must be 1-256 characters")
	case strings.HasPrefix(lower, "outflow."):
		return bad("uses the reserved outflow. prefix")
	case strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon."):
		return bad("uses a prefix reserved by AWS")
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return bad("may not start or end with a period or hold two in a row")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return bad("may hold only letters, digits, underscores, hyphens and periods")
		}
	}
	return nil
}

// ValidID reports whether s is a valid FIFO message group or deduplication
// id: 1-128 printable ASCII characters without spaces. Dispatch keys must
// be one, since they are the deduplication id.
func ValidID(s string) bool {
	if s == "" || len(s) > maxID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}
