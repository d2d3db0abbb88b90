package delivery

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Message attribute names Outflow sets on every message. Row attributes may
// not use the "outflow." prefix.
const (
	AttrKey      = "outflow.key"
	AttrAttempt  = "outflow.attempt"
	AttrEncoding = "outflow.encoding"
)

// SQS limits.
const (
	// MaxAttributes is the most message attributes SQS accepts.
	MaxAttributes = 10
	// MaxBatchEntries is the most entries in one SendMessageBatch.
	MaxBatchEntries = 10
	// MaxMessageBytes is the size limit of one message and of one batch,
	// body plus attribute names, types and values. SQS accepts up to 1 MiB
	// today; 256 KiB is what every emulator and older region accepts, so it
	// is the default.
	MaxMessageBytes = 256 * 1024
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
)

// Validate reports why SQS would refuse row, if it would: the checks the
// deliverer applies before sending, for producers to apply at staging.
// maxBytes 0 means MaxMessageBytes.
func Validate(row outbox.Row, fifo bool, maxBytes int) error {
	if maxBytes <= 0 {
		maxBytes = MaxMessageBytes
	}
	_, size, err := entry("0", row, fifo)
	if err != nil {
		return err
	}
	if size > maxBytes {
		return fmt.Errorf("%w: %d bytes with attributes, over the %d-byte limit", ErrTooLarge, size, maxBytes)
	}
	return nil
}

// entry builds the batch entry for a row and returns its size as SQS
// counts it.
func entry(id string, row outbox.Row, fifo bool) (types.SendMessageBatchRequestEntry, int, error) {
	if len(row.Payload) == 0 {
		return types.SendMessageBatchRequestEntry{}, 0, fmt.Errorf("%w: SQS needs a message body of at least one character", ErrEmptyPayload)
	}
	body, binary := Body(row.Payload)
	attrs := map[string]types.MessageAttributeValue{
		AttrKey:     {DataType: aws.String("String"), StringValue: aws.String(row.Key)},
		AttrAttempt: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(row.Attempt))},
	}
	if binary {
		attrs[AttrEncoding] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("base64")}
	}
	for k, v := range row.Attributes {
		if err := attributeName(k); err != nil {
			return types.SendMessageBatchRequestEntry{}, 0, err
		}
		if !sqsText([]byte(v)) {
			return types.SendMessageBatchRequestEntry{}, 0, fmt.Errorf("%w: %q must be non-empty text of characters SQS allows", ErrAttributeValue, k)
		}
		attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	if len(attrs) > MaxAttributes {
		return types.SendMessageBatchRequestEntry{}, 0, fmt.Errorf("%w: %d with Outflow's own, SQS allows %d", ErrTooManyAttributes, len(attrs), MaxAttributes)
	}
	size := len(body)
	for k, v := range attrs {
		size += len(k) + len(*v.DataType) + len(*v.StringValue)
	}
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body), MessageAttributes: attrs}
	if fifo {
		if row.Group == "" {
			return e, size, fmt.Errorf("%w, and the row has none", ErrGroupRequired)
		}
		if !ValidID(row.Group) {
			return e, size, fmt.Errorf("%w: group %q must be 1-128 ASCII letters, digits or punctuation", ErrInvalidID, row.Group)
		}
		if !ValidID(row.Key) {
			return e, size, fmt.Errorf("%w: key %q must be 1-128 ASCII letters, digits or punctuation to be a deduplication id", ErrInvalidID, row.Key)
		}
		e.MessageGroupId = aws.String(row.Group)
		e.MessageDeduplicationId = aws.String(row.Key)
	}
	return e, size, nil
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
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}
