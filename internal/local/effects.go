package local

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/consume"
)

// effects is the demo's consumer: it decodes each message with package
// consume and applies it with an Inbox, the effect (a count on the row's
// own item) in one transaction with the inbox item, so the demo can show
// each delivered row applied once, duplicates and redeliveries
// notwithstanding.
type effects struct {
	// ctx is the demo's: the consumers' hooks carry none.
	ctx   context.Context
	db    *dynamodb.Client
	table string

	mu      sync.Mutex
	inboxes map[string]*consume.Inbox
	errs    map[string]bool
}

// newEffects creates the consumer's table, beside the stack's.
func newEffects(ctx context.Context, db *dynamodb.Client, prefix string) (*effects, error) {
	e := &effects{ctx: ctx, db: db, table: prefix + "-effects", inboxes: map[string]*consume.Inbox{}, errs: map[string]bool{}}
	if err := consume.CreateTable(ctx, db, e.table); err != nil {
		return nil, fmt.Errorf("the consumer's table: %w", err)
	}
	return e, nil
}

// effectKey is the key of the item that counts a row's effects.
func effectKey(rowKey string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "effect " + rowKey}}
}

// apply applies a message received from route; an ErrDuplicate is a copy
// of one applied already. Failures are kept for the report.
func (e *effects) apply(route string, m sqstypes.Message) {
	msg, err := consume.FromSQS(m)
	if err == nil {
		var in *consume.Inbox
		if in, err = e.inbox(route); err == nil {
			err = in.Apply(e.ctx, msg, types.TransactWriteItem{Update: &types.Update{
				TableName: aws.String(e.table), Key: effectKey(msg.Key),
				UpdateExpression:          aws.String("ADD applied :one"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
			}})
		}
	}
	if err != nil && !errors.Is(err, consume.ErrDuplicate) && e.ctx.Err() == nil {
		e.mu.Lock()
		e.errs[fmt.Sprintf("consumer of %s: %v", route, err)] = true
		e.mu.Unlock()
	}
}

// inbox is route's Inbox: each route's consumer has its own name, as an
// ordered route's must.
func (e *effects) inbox(route string) (*consume.Inbox, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if in, ok := e.inboxes[route]; ok {
		return in, nil
	}
	in, err := consume.NewInbox(e.db, consume.InboxConfig{Table: e.table, Consumer: "demo-" + route})
	if err != nil {
		return nil, err
	}
	e.inboxes[route] = in
	return in, nil
}

// once counts the keys whose effect was applied exactly once, and says
// how each other one was applied.
func (e *effects) once(ctx context.Context, keys []string) (int, []string, error) {
	n := 0
	var problems []string
	for _, k := range keys {
		out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: effectKey(k), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return 0, nil, fmt.Errorf("read the effect of %s: %w", k, err)
		}
		applied := int64(0)
		if v, ok := out.Item["applied"].(*types.AttributeValueMemberN); ok {
			applied, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		if applied == 1 {
			n++
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: effect applied %d times, want once", k, applied))
	}
	e.mu.Lock()
	for err := range e.errs {
		problems = append(problems, err)
	}
	e.mu.Unlock()
	return n, problems, nil
}
