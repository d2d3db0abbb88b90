package dynamo

import (
	"errors"
	"fmt"
	"strconv"
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
	Key         string            `dynamodbav:"pk"`
	Queue       string            `dynamodbav:"queue"`
	Attributes  map[string]string `dynamodbav:"attributes,omitempty"`
	Group       string            `dynamodbav:"group,omitempty"`
	NotBefore   int64             `dynamodbav:"not_before,omitempty"`
	Seq         int64             `dynamodbav:"seq,omitempty"`
	Prev        string            `dynamodbav:"prev,omitempty"`
	Status      string            `dynamodbav:"status"`
	Attempt     int               `dynamodbav:"attempt"`
	CreatedAt   int64             `dynamodbav:"created_at"`
	DueAt       int64             `dynamodbav:"due_at,omitempty"`
	Shard       string            `dynamodbav:"shard,omitempty"`
	Token       string            `dynamodbav:"claim_token,omitempty"`
	LeaseUntil  int64             `dynamodbav:"lease_until,omitempty"`
	FailedAt    int64             `dynamodbav:"failed_at,omitempty"`
	UnsureAt    int64             `dynamodbav:"unsure_at,omitempty"`
	RedrivenAt  int64             `dynamodbav:"redriven_at,omitempty"`
	MaybeClosed int64             `dynamodbav:"place_maybe_closed,omitempty"`
	Closed      string            `dynamodbav:"closed,omitempty"`
	DeadQueue   string            `dynamodbav:"dead_queue,omitempty"`
	Errors      []attemptError    `dynamodbav:"errors,omitempty"`
	LastError   string            `dynamodbav:"last_error,omitempty"`
	StageID     string            `dynamodbav:"stage_id,omitempty"`
	Content     string            `dynamodbav:"content,omitempty"`
}

type attemptError struct {
	At      int64  `dynamodbav:"at"`
	Attempt int    `dynamodbav:"attempt"`
	Message string `dynamodbav:"message"`
	// Unsure is written only when true: the attempt's outcome is unknown.
	Unsure bool `dynamodbav:"unsure,omitempty"`
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
		NotBefore: ms(row.NotBefore), Seq: row.Seq, Prev: row.Prev, Status: string(row.Status), Attempt: row.Attempt,
		CreatedAt: ms(row.CreatedAt), Token: row.Token, LeaseUntil: ms(row.LeaseUntil), UnsureAt: ms(row.UnsureAt),
		RedrivenAt: ms(row.RedrivenAt), MaybeClosed: ms(row.PlaceMaybeClosed), Closed: row.Closed, LastError: row.LastError, Errors: encodeErrors(row.Errors), StageID: row.StageID,
		Content: row.ContentDigest,
	}
	switch row.Status {
	case outbox.StatusPending, outbox.StatusClaimed:
		it.DueAt = ms(row.DueAt)
		if !row.Unindexed {
			// A lean row stays out of the due index: its stream record is
			// its path, and the backstop's scan finds it if that fails.
			it.Shard = ShardFor(row, shards)
		}
	case outbox.StatusFailed:
		it.FailedAt, it.DeadQueue = ms(row.FailedAt), deadQueue(row.Queue)
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode row %s: %w", row.Key, err)
	}
	if !dropped(row) {
		av[AttrPayload] = encodePayload(row.Payload)
	}
	return av, nil
}

// deadQueue is the dead-index partition for a queue name. Index keys may
// not be empty strings, and a partition key holds at most 2048 bytes, so a
// queue name no route could have goes under "(none)" too.
func deadQueue(queue string) string {
	if queue == "" || len(queue) > maxDeadQueue {
		return DeadQueueNone
	}
	return queue
}

// maxDeadQueue is the longest queue name kept as a dead-index key.
const maxDeadQueue = 1024

func encodePayload(p []byte) types.AttributeValue {
	if utf8.Valid(p) {
		return &types.AttributeValueMemberS{Value: string(p)}
	}
	return &types.AttributeValueMemberB{Value: p}
}

func encodeErrors(errs []outbox.AttemptError) []attemptError {
	out := make([]attemptError, 0, len(errs))
	for _, e := range errs {
		out = append(out, attemptError{At: ms(e.At), Attempt: e.Attempt, Message: e.Message, Unsure: e.Unsure})
	}
	return out
}

// Decode reads a stored row. An item that is not a valid row gives an error
// wrapping ErrMalformed that says what is wrong; the returned row then holds
// whatever could be read. Each attribute is read on its own, in a fixed
// order, so one bad attribute never hides the others and the error is the
// same on every read.
func Decode(av map[string]types.AttributeValue) (outbox.Row, error) {
	d := decoder{av: av}
	var row outbox.Row
	row.Key = d.str(AttrKey)
	st, serr := decodeState(av)
	row.Status, row.Attempt = outbox.Status(d.str(AttrStatus)), st.Attempt
	if serr == nil {
		row.Status = st.Status
	}
	row.Queue = d.str(AttrQueue)
	row.ContentDigest = d.str(AttrContent)
	// A tombstone (done) has no payload: its settle dropped it, and its
	// attributes, for their digest. Every other row must have one.
	if row.Status != outbox.StatusDone || av[AttrPayload] != nil {
		row.Payload = d.payload()
	}
	row.Attributes = d.strMap(AttrAttributes)
	row.Group = d.str(AttrGroup)
	row.NotBefore = fromMs(d.num(AttrNotBefore))
	row.Seq = d.num(AttrSeq)
	row.Prev = d.str(AttrPrev)
	row.CreatedAt = fromMs(d.num(AttrCreatedAt))
	row.DueAt = fromMs(d.num(AttrDueAt))
	row.Token = d.str(AttrToken)
	row.LeaseUntil = fromMs(d.num(AttrLeaseUntil))
	row.FailedAt = fromMs(d.num(AttrFailedAt))
	row.UnsureAt = fromMs(d.num(AttrUnsureAt))
	// redriven_at is for operators (the history's attempts count from 1
	// again after it): a bad one is left unread, not a reason to
	// dead-letter the row.
	if n, ok := wholeNumber(d.av, AttrRedrivenAt); ok {
		row.RedrivenAt = fromMs(n)
	}
	if n, ok := wholeNumber(d.av, AttrPlaceMaybeClosed); ok {
		row.PlaceMaybeClosed = fromMs(n)
	}
	row.Closed = d.str(AttrClosed)
	row.Errors = d.errors()
	row.LastError = d.str(AttrLastError)
	row.StageID = d.str(AttrStageID)
	row.Unindexed = (row.Status == outbox.StatusPending || row.Status == outbox.StatusClaimed) && av[AttrShard] == nil
	if serr == nil {
		// The state's own reading is the one the conditions use, whatever
		// the strict reading above made of these two (a fraction, say).
		if _, ok := av[AttrDueAt].(*types.AttributeValueMemberN); ok {
			row.DueAt = fromMs(st.DueAt)
		}
		if st.Status == outbox.StatusClaimed {
			row.LeaseUntil = fromMs(st.LeaseUntil)
		}
	}
	if n, ok := av[AttrAttempt].(*types.AttributeValueMemberN); ok && serr == nil {
		if _, err := strconv.Atoi(n.Value); err != nil {
			d.fail("%s must be a whole number, got %s", AttrAttempt, n.Value)
		}
	}
	switch {
	case row.Key == "":
		return row, fmt.Errorf("%w: missing %s", ErrMalformed, AttrKey)
	case serr != nil:
		return row, serr
	case row.Queue == "" && d.err == nil:
		return row, fmt.Errorf("%w: missing %s", ErrMalformed, AttrQueue)
	case d.err != nil:
		return row, d.err
	}
	return row, nil
}

// decoder reads attributes one by one and keeps the first error, in the
// order they are read.
type decoder struct {
	av  map[string]types.AttributeValue
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

// str reads an optional string attribute.
func (d *decoder) str(name string) string {
	switch v := d.av[name].(type) {
	case nil:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		d.fail("%s must be a string, got %s", name, typeName(v))
		return ""
	}
}

// wholeNumber reads item's attribute name leniently: ok is false when it
// is absent, not a number or not a whole one. For the attributes a bad
// value of which is no reason to refuse the item (num is the strict read).
func wholeNumber(item map[string]types.AttributeValue, name string) (n int64, ok bool) {
	v, isNum := item[name].(*types.AttributeValueMemberN)
	if !isNum {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

// num reads an optional integer attribute.
func (d *decoder) num(name string) int64 {
	switch v := d.av[name].(type) {
	case nil:
		return 0
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d.fail("%s must be a whole number of milliseconds, got %s", name, v.Value)
		}
		return n
	default:
		d.fail("%s must be a number, got %s", name, typeName(v))
		return 0
	}
}

func (d *decoder) payload() []byte {
	switch v := d.av[AttrPayload].(type) {
	case *types.AttributeValueMemberS:
		return []byte(v.Value)
	case *types.AttributeValueMemberB:
		return v.Value
	case nil:
		d.fail("missing %s", AttrPayload)
	default:
		d.fail("%s must be a string or binary, got %s", AttrPayload, typeName(v))
	}
	return nil
}

func (d *decoder) strMap(name string) map[string]string {
	switch v := d.av[name].(type) {
	case nil:
		return nil
	case *types.AttributeValueMemberM:
		out := make(map[string]string, len(v.Value))
		for k, e := range v.Value {
			s, ok := e.(*types.AttributeValueMemberS)
			if !ok {
				d.fail("%s.%s must be a string, got %s", name, k, typeName(e))
				continue
			}
			out[k] = s.Value
		}
		return out
	default:
		d.fail("%s must be a map of strings, got %s", name, typeName(v))
		return nil
	}
}

func (d *decoder) errors() []outbox.AttemptError {
	v, ok := d.av[AttrErrors]
	if !ok {
		return nil
	}
	var list []attemptError
	if err := attributevalue.Unmarshal(v, &list); err != nil {
		d.fail("%s must be a list of {at, attempt, message}: %s", AttrErrors, err)
		return nil
	}
	var out []outbox.AttemptError
	for _, e := range list {
		out = append(out, outbox.AttemptError{At: fromMs(e.At), Attempt: e.Attempt, Message: e.Message, Unsure: e.Unsure})
	}
	return out
}
