package outflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Why DynamoDB canceled a transaction that stages rows. A *TransactError
// wraps one of these (or ErrKeyConflict, or ErrGroupRace) per item that
// failed.
var (
	// ErrAlreadyStaged: the outbox row's key is staged already with the
	// same content, most likely by an earlier try of the same transaction
	// that committed. Put counts this as success; in a transaction it
	// means this transaction wrote nothing, your writes included.
	ErrAlreadyStaged = errors.New("row already staged with the same content")
	// ErrConditionFailed: the condition of one of your own writes failed.
	ErrConditionFailed = errors.New("condition failed")
	// ErrTransactionConflict: another transaction or write held an item
	// while this one ran. Sending the transaction again may succeed.
	ErrTransactionConflict = errors.New("transaction conflict: another transaction held the item")
)

// Cancellation reason codes DynamoDB gives per item.
const (
	codeNone            = "None"
	codeConditionFailed = "ConditionalCheckFailed"
	codeConflict        = "TransactionConflict"
)

// TransactError is a TransactWriteItems cancellation, explained per item:
// nothing in the transaction was written. It wraps each item's error (so
// errors.Is finds ErrKeyConflict, ErrAlreadyStaged, ErrGroupRace,
// ErrConditionFailed or ErrTransactionConflict, and errors.As an
// *ItemError) and the error TransactWriteItems returned (so errors.As
// finds the *types.TransactionCanceledException).
type TransactError struct {
	// Items are the items DynamoDB gave a reason for, in the order sent.
	Items []*ItemError
	// Err is the error TransactWriteItems returned.
	Err error
}

// Error lists every failed item.
func (e *TransactError) Error() string {
	if len(e.Items) == 0 {
		return "transaction canceled, nothing written: " + e.Err.Error()
	}
	parts := make([]string, len(e.Items))
	for i, it := range e.Items {
		parts[i] = it.Error()
	}
	return "transaction canceled, nothing written: " + strings.Join(parts, "; ")
}

// Unwrap gives the items' errors and the original error.
func (e *TransactError) Unwrap() []error {
	errs := make([]error, 0, len(e.Items)+1)
	for _, it := range e.Items {
		errs = append(errs, it)
	}
	return append(errs, e.Err)
}

// Retryable reports whether sending the transaction again, with a fresh
// TransactItems for each ordered row, may succeed: every item failed only
// because another writer got there first (a moved group tail or a
// transaction conflict).
func (e *TransactError) Retryable() bool {
	for _, it := range e.Items {
		if !errors.Is(it.Reason, ErrGroupRace) && !errors.Is(it.Reason, ErrTransactionConflict) {
			return false
		}
	}
	return len(e.Items) > 0
}

// ItemError is why one item of a canceled transaction failed.
type ItemError struct {
	// Index is the item's position in TransactItems.
	Index int
	// Table is the item's table.
	Table string
	// Key is the item's key, for an Update, a Delete or a ConditionCheck.
	// A Put does not say which of its attributes form the key: use Index.
	Key map[string]types.AttributeValue
	// Row is the outbox row's key when the item stages a row.
	Row string
	// Queue and Group name the ordered group when the item moves its tail.
	Queue, Group string
	// Code and Message are DynamoDB's cancellation reason.
	Code, Message string
	// Reason is ErrAlreadyStaged, ErrKeyConflict, ErrGroupRace,
	// ErrConditionFailed or ErrTransactionConflict; nil for another code
	// (a throttle, a validation error), which Code says.
	Reason error
}

// Error says which item failed and why, without its content.
func (e *ItemError) Error() string {
	var what string
	switch {
	case e.Row != "":
		what = "outbox row " + e.Row
	case e.Group != "":
		what = fmt.Sprintf("tail of group %q of %s", e.Group, e.Queue)
	case e.Key != nil:
		what = "table " + e.Table + " key " + formatKey(e.Key)
	default:
		what = "put into table " + e.Table
	}
	why := e.Code
	switch {
	case errors.Is(e.Reason, ErrGroupRace):
		why = "another producer staged into the group first (build the row's items again with TransactItems)"
	case e.Reason != nil:
		why = e.Reason.Error()
	case e.Message != "":
		why += ": " + e.Message
	}
	return fmt.Sprintf("item %d (%s): %s", e.Index, what, why)
}

// Unwrap gives the reason's sentinel.
func (e *ItemError) Unwrap() error { return e.Reason }

// formatKey prints a key's string and number attributes, sorted by name;
// a key is never a payload.
func formatKey(key map[string]types.AttributeValue) string {
	names := make([]string, 0, len(key))
	for name := range key {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		switch v := key[name].(type) {
		case *types.AttributeValueMemberS:
			parts[i] = fmt.Sprintf("%s=%q", name, v.Value)
		case *types.AttributeValueMemberN:
			parts[i] = name + "=" + v.Value
		default:
			parts[i] = name + "=(binary)"
		}
	}
	return strings.Join(parts, ",")
}

// Classify explains err, the error TransactWriteItems returned for items
// (the TransactItems you sent, in order: DynamoDB's reasons are matched to
// them by position). A cancellation becomes a *TransactError that names
// each failed item: an outbox row whose key is staged already, with the
// same content (ErrAlreadyStaged) or not (ErrKeyConflict); an ordered
// group whose tail another producer moved (ErrGroupRace); one of your own
// writes whose condition failed (ErrConditionFailed); any item another
// transaction held (ErrTransactionConflict). Any other error, and nil,
// come back as they are.
//
// To tell the two kinds of staged key apart Classify uses the item that
// DynamoDB returns with the reason (TransactItem and TransactItems ask for
// it), or reads the row if the reason has none.
func (p *Producer) Classify(ctx context.Context, err error, items []types.TransactWriteItem) error {
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) {
		return err
	}
	out := &TransactError{Err: err}
	for i, reason := range canceled.CancellationReasons {
		code := aws.ToString(reason.Code)
		if code == "" || code == codeNone {
			continue
		}
		ie := &ItemError{Index: i, Code: code, Message: aws.ToString(reason.Message)}
		if i < len(items) {
			p.describe(ie, items[i])
		}
		switch {
		case code == codeConflict:
			ie.Reason = ErrTransactionConflict
		case code != codeConditionFailed:
		case ie.Row != "":
			ie.Reason = p.stagedReason(ctx, items[i], reason.Item)
		case ie.Group != "":
			ie.Reason = ErrGroupRace
		default:
			ie.Reason = ErrConditionFailed
		}
		out.Items = append(out.Items, ie)
	}
	return out
}

// describe fills in which item it is: an outbox row's put, an ordered
// group's tail update (both in the producer's table), or one of yours.
func (p *Producer) describe(ie *ItemError, item types.TransactWriteItem) {
	switch {
	case item.Put != nil:
		ie.Table = aws.ToString(item.Put.TableName)
		if ie.Table == p.store.Table() {
			if row, err := dynamo.Decode(item.Put.Item); err == nil {
				ie.Row = row.Key
			}
		}
	case item.Update != nil:
		ie.Table, ie.Key = aws.ToString(item.Update.TableName), item.Update.Key
		if ie.Table == p.store.Table() {
			ie.Queue, ie.Group = groupOf(item.Update.Key)
		}
	case item.Delete != nil:
		ie.Table, ie.Key = aws.ToString(item.Delete.TableName), item.Delete.Key
	case item.ConditionCheck != nil:
		ie.Table, ie.Key = aws.ToString(item.ConditionCheck.TableName), item.ConditionCheck.Key
	}
}

// groupOf reads an ordered group's item key, "group <queue> <group>";
// queue names and group ids hold no spaces.
func groupOf(key map[string]types.AttributeValue) (queue, group string) {
	pk, ok := key[dynamo.AttrKey].(*types.AttributeValueMemberS)
	if !ok {
		return "", ""
	}
	parts := strings.SplitN(pk.Value, " ", 3)
	if len(parts) != 3 || dynamo.GroupKey(parts[1], parts[2]) != pk.Value {
		return "", ""
	}
	return parts[1], parts[2]
}

// stagedReason follows Put's rule for a key that is staged already: the
// same content is ErrAlreadyStaged, other content ErrKeyConflict. current
// is the item DynamoDB returned with the reason; without it the row is
// read.
func (p *Producer) stagedReason(ctx context.Context, sent types.TransactWriteItem, current map[string]types.AttributeValue) error {
	row, err := dynamo.Decode(sent.Put.Item)
	if err != nil {
		return ErrKeyConflict
	}
	var cur *outbox.Row
	if len(current) > 0 {
		// A row that does not decode whole still has content to compare.
		if decoded, derr := dynamo.Decode(current); derr == nil || decoded.Key != "" {
			cur = &decoded
		}
	} else {
		got, gerr := p.store.Get(ctx, row.Key)
		if got == nil && gerr != nil {
			return fmt.Errorf("key staged already, and reading it to compare its content failed: %w", gerr)
		}
		cur = got
	}
	if cur != nil && dynamo.SameContent(*cur, row) {
		return ErrAlreadyStaged
	}
	return ErrKeyConflict
}

// Transact stages rows together with your own writes in one
// TransactWriteItems: it appends each row's writes (those TransactItems
// gives) after in.TransactItems, sends the transaction with the
// producer's client, and explains a cancellation with Classify. It
// returns the rows' keys, generated where Key was empty. in is not
// changed. Either every write commits or none does.
//
// It sends once: whether to send your writes again is yours to decide
// (errors.As a *TransactError and ask Retryable). A transaction stages at
// most one row per ordered group, since each moves the group's tail. For
// the transaction's output (consumed capacity), use TransactItems,
// TransactWriteItems and Classify yourself.
func (p *Producer) Transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, rows ...Row) ([]string, error) {
	tx := *in
	tx.TransactItems = append([]types.TransactWriteItem(nil), in.TransactItems...)
	keys := make([]string, len(rows))
	groups := map[string]int{}
	for i, r := range rows {
		row, err := p.prepare(r)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if p.ordered[row.Queue] {
			id := dynamo.GroupKey(row.Queue, row.Group)
			if j, ok := groups[id]; ok {
				return nil, fmt.Errorf("rows %d and %d: %w: both in group %q of %s, and a transaction moves a group's tail once", j, i, ErrOrderedRoute, row.Group, row.Queue)
			}
			groups[id] = i
		}
		items, err := p.stageItems(ctx, row)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		keys[i] = row.Key
		tx.TransactItems = append(tx.TransactItems, items...)
	}
	if _, err := p.api.TransactWriteItems(ctx, &tx); err != nil {
		return nil, p.Classify(ctx, fmt.Errorf("stage %d rows in a transaction: %w", len(rows), err), tx.TransactItems)
	}
	return keys, nil
}
