package dynamo

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// item is a row as stored. The payload is kept apart because it is stored
// as a string when it is UTF-8 text (readable in the console) and as binary
// otherwise.
type item struct {
	Key        string            `dynamodbav:"pk"`
	Queue      string            `dynamodbav:"queue"`
	Attributes map[string]string `dynamodbav:"attributes,omitempty"`
	Group      string            `dynamodbav:"group,omitempty"`
	NotBefore  int64             `dynamodbav:"not_before,omitempty"`
	Status     string            `dynamodbav:"status"`
	Attempt    int               `dynamodbav:"attempt"`
	CreatedAt  int64             `dynamodbav:"created_at"`
	DueAt      int64             `dynamodbav:"due_at,omitempty"`
	Shard      string            `dynamodbav:"shard,omitempty"`
	Token      string            `dynamodbav:"claim_token,omitempty"`
	LeaseUntil int64             `dynamodbav:"lease_until,omitempty"`
	FailedAt   int64             `dynamodbav:"failed_at,omitempty"`
	DeadQueue  string            `dynamodbav:"dead_queue,omitempty"`
	Errors     []attemptError    `dynamodbav:"errors,omitempty"`
	LastError  string            `dynamodbav:"last_error,omitempty"`
}

type attemptError struct {
	At      int64  `dynamodbav:"at"`
	Attempt int    `dynamodbav:"attempt"`
	Message string `dynamodbav:"message"`
}

// state is the part of an item the state machine's conditions read. An
// item whose state does not decode can never be claimed and is quarantined.
type state struct {
	Status     string `dynamodbav:"status"`
	Attempt    int    `dynamodbav:"attempt"`
	LeaseUntil int64  `dynamodbav:"lease_until"`
	DueAt      int64  `dynamodbav:"due_at"`
}

// ErrMalformed is wrapped by every decode error.
var ErrMalformed = errors.New("malformed item")

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// Encode returns the stored form of a row, with the due-index keys set
// while the row is pending or claimed and the dead-index keys while failed.
func Encode(row outbox.Row, shards int) (map[string]types.AttributeValue, error) {
	it := item{
		Key: row.Key, Queue: row.Queue, Attributes: row.Attributes, Group: row.Group,
		NotBefore: ms(row.NotBefore), Status: string(row.Status), Attempt: row.Attempt,
		CreatedAt: ms(row.CreatedAt), Token: row.Token, LeaseUntil: ms(row.LeaseUntil),
		LastError: row.LastError, Errors: encodeErrors(row.Errors),
	}
	switch row.Status {
	case outbox.StatusPending, outbox.StatusClaimed:
		it.DueAt, it.Shard = ms(row.DueAt), ShardOf(row.Key, shards)
	case outbox.StatusFailed:
		it.FailedAt, it.DeadQueue = ms(row.FailedAt), deadQueue(row.Queue)
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode row %s: %w", row.Key, err)
	}
	av[AttrPayload] = encodePayload(row.Payload)
	return av, nil
}

// deadQueue is the dead-index partition for a queue name; index keys may
// not be empty strings.
func deadQueue(queue string) string {
	if queue == "" {
		return "(none)"
	}
	return queue
}

func encodePayload(p []byte) types.AttributeValue {
	if utf8.Valid(p) {
		return &types.AttributeValueMemberS{Value: string(p)}
	}
	return &types.AttributeValueMemberB{Value: p}
}

func encodeErrors(errs []outbox.AttemptError) []attemptError {
	out := make([]attemptError, 0, len(errs))
	for _, e := range errs {
		out = append(out, attemptError{At: ms(e.At), Attempt: e.Attempt, Message: e.Message})
	}
	return out
}

// Decode reads a stored row. An item that is not a valid row gives an error
// wrapping ErrMalformed that says what is wrong; the returned row then holds
// whatever could be read.
func Decode(av map[string]types.AttributeValue) (outbox.Row, error) {
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return rowOf(it, nil), fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	payload, perr := decodePayload(av[AttrPayload])
	row := rowOf(it, payload)
	switch {
	case it.Key == "":
		return row, fmt.Errorf("%w: missing %s", ErrMalformed, AttrKey)
	case !row.Status.Valid():
		return row, fmt.Errorf("%w: unknown %s %q", ErrMalformed, AttrStatus, it.Status)
	case it.Queue == "":
		return row, fmt.Errorf("%w: missing %s", ErrMalformed, AttrQueue)
	case perr != nil:
		return row, perr
	}
	return row, nil
}

// decodeState reports whether av's state-machine fields are readable.
func decodeState(av map[string]types.AttributeValue) error {
	var st state
	if err := attributevalue.UnmarshalMap(av, &st); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !outbox.Status(st.Status).Valid() {
		return fmt.Errorf("%w: unknown %s %q", ErrMalformed, AttrStatus, st.Status)
	}
	return nil
}

func decodePayload(av types.AttributeValue) ([]byte, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return []byte(v.Value), nil
	case *types.AttributeValueMemberB:
		return v.Value, nil
	case nil:
		return nil, fmt.Errorf("%w: missing %s", ErrMalformed, AttrPayload)
	default:
		return nil, fmt.Errorf("%w: %s must be a string or binary, got %T", ErrMalformed, AttrPayload, av)
	}
}

func rowOf(it item, payload []byte) outbox.Row {
	row := outbox.Row{
		Key: it.Key, Queue: it.Queue, Payload: payload, Attributes: it.Attributes, Group: it.Group,
		NotBefore: fromMs(it.NotBefore), Status: outbox.Status(it.Status), Attempt: it.Attempt,
		CreatedAt: fromMs(it.CreatedAt), DueAt: fromMs(it.DueAt), Token: it.Token,
		LeaseUntil: fromMs(it.LeaseUntil), FailedAt: fromMs(it.FailedAt), LastError: it.LastError,
	}
	for _, e := range it.Errors {
		row.Errors = append(row.Errors, outbox.AttemptError{At: fromMs(e.At), Attempt: e.Attempt, Message: e.Message})
	}
	return row
}
