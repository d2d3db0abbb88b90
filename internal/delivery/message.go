package delivery

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
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

// errTooManyAttributes is returned for rows whose attributes, with
// Outflow's own, exceed MaxAttributes.
var errTooManyAttributes = errors.New("too many message attributes")

// entry builds the batch entry for a row and returns its size as SQS
// counts it.
func entry(id string, row outbox.Row, fifo bool) (types.SendMessageBatchRequestEntry, int, error) {
	if len(row.Payload) == 0 {
		return types.SendMessageBatchRequestEntry{}, 0, errors.New("empty payload: SQS needs a message body of at least one character")
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
		attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	if len(attrs) > MaxAttributes {
		return types.SendMessageBatchRequestEntry{}, 0, fmt.Errorf("%w: %d with Outflow's own, SQS allows %d", errTooManyAttributes, len(attrs), MaxAttributes)
	}
	size := len(body)
	for k, v := range attrs {
		size += len(k) + len(*v.DataType) + len(*v.StringValue)
	}
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body), MessageAttributes: attrs}
	if fifo {
		if row.Group == "" {
			return e, size, errors.New("a FIFO queue needs a message group, and the row has none")
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
