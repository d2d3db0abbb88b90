package outflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Why DynamoDB canceled a transaction that stages rows. A *TransactError
// wraps one of these (or ErrKeyConflict, or ErrGroupRace) per item whose
// reason Classify knows (ItemError.Reason).
var (
	// ErrAlreadyStaged means the outbox row's key is staged already with
	// the same content, most likely by an earlier try of the same
	// transaction that committed. Put counts this as success; in a transaction it
	// means this transaction wrote nothing, your writes included.
	ErrAlreadyStaged = errors.New("row already staged with the same content")
	// ErrConditionFailed means the condition of one of your own writes
	// failed.
	ErrConditionFailed = errors.New("condition failed")
	// ErrTransactionConflict means another transaction or write held an
	// item while this one ran. Sending the transaction again may succeed.
	ErrTransactionConflict = errors.New("transaction conflict: another transaction held the item")
	// ErrThrottled means the table or an index was over its capacity.
	// Sending the transaction again, after a backoff, may succeed.
	ErrThrottled = errors.New("throttled: the table or an index was over its capacity")
	// ErrKeyGone means the outbox row's key was staged when DynamoDB
	// checked, and its row is gone since (delivered and expired, or
	// purged): its content could not be compared, and sending again
	// stages it anew.
	ErrKeyGone = errors.New("key was staged, and its row is gone now")
)

// Cancellation reason codes DynamoDB gives per item.
const (
	codeNone            = "None"
	codeConditionFailed = "ConditionalCheckFailed"
	codeConflict        = "TransactionConflict"
)

// throttled holds the reason codes of an item over capacity.
var throttled = map[string]bool{"ThrottlingError": true, "ProvisionedThroughputExceeded": true, "RequestLimitExceeded": true}

// TransactError is a TransactWriteItems cancellation, explained per item:
// nothing in the transaction was written. It wraps each item's error (so
// errors.Is finds ErrKeyConflict, ErrAlreadyStaged, ErrKeyGone,
// ErrGroupRace, ErrConditionFailed, ErrTransactionConflict or
// ErrThrottled, and errors.As an *ItemError) and the error
// TransactWriteItems returned (so errors.As finds the
// *types.TransactionCanceledException).
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

// Retryable reports whether sending the transaction again, with the
// ordered rows' items built anew by TransactItems (Transact does), may
// succeed: every item failed only
// because another writer got there first (a moved group tail or a
// transaction conflict) or the table was over its capacity (throttled:
// back off first).
func (e *TransactError) Retryable() bool {
	for _, it := range e.Items {
		if !errors.Is(it.Reason, ErrGroupRace) && !errors.Is(it.Reason, ErrTransactionConflict) && !errors.Is(it.Reason, ErrThrottled) {
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
	// Reason is ErrAlreadyStaged, ErrKeyConflict, ErrKeyGone,
	// ErrGroupRace, ErrConditionFailed, ErrTransactionConflict or
	// ErrThrottled (any of DynamoDB's throttle codes); for a staged key
	// whose row could not be read to compare, the error reading it; nil
	// for another code (a validation error), which Code says.
	Reason error

	// byTransact is set for an item of a transaction Transact sent: it
	// builds the rows' items itself, so a lost group race is retried by
	// calling it again, not by building items.
	byTransact bool
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
	case errors.Is(e.Reason, ErrGroupRace) && e.byTransact:
		why = "another producer staged into the group first (call Transact again: it builds the rows' items anew)"
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
