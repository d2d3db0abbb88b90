package outflow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Classify explains err, the error TransactWriteItems returned for items
// (the TransactItems you sent, in order: DynamoDB's reasons are matched to
// them by position). A cancellation becomes a *TransactError that names
// each failed item: an outbox row whose key is staged already, with the
// same content (ErrAlreadyStaged) or not (ErrKeyConflict); an ordered
// group whose tail another producer moved (ErrGroupRace); one of your own
// writes whose condition failed (ErrConditionFailed); any item another
// transaction held (ErrTransactionConflict); an item over capacity
// (ErrThrottled). Any other error, and nil, come back as they are.
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
		case throttled[code]:
			ie.Reason = ErrThrottled
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
		// Only a route the producer orders has group items: an update of
		// a key that merely reads "group a b" is one of yours.
		if q, g := groupOf(item.Update.Key); ie.Table == p.store.Table() && p.ordered.known(q) {
			ie.Queue, ie.Group = q, g
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
		if got == nil {
			return ErrKeyGone
		}
		cur = got
	}
	if cur != nil && dynamo.SameContent(*cur, row) {
		return ErrAlreadyStaged
	}
	return ErrKeyConflict
}
