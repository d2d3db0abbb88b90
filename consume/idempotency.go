package consume

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RecordAPI is the part of the DynamoDB client Idempotency uses.
type RecordAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Idempotency guards a side effect outside DynamoDB (a call to another
// service, an email) with a record per message: in progress, with an
// expiry, while the effect runs; completed, with a TTL, after. A copy
// that arrives while another runs is retried later; after completion it
// is skipped.
//
// This is effectively once when the effect itself is idempotent (the
// other service dedups on the message's key, say), or when a crash
// between the effect and the completed record is rare enough to accept:
// such a crash, or an effect that outlives its hold, lets a later copy
// run the effect again. docs/consuming.md says more.
type Idempotency struct {
	api      RecordAPI
	table    string
	consumer string
	hold     time.Duration
	ttl      time.Duration
	now      func() time.Time
}

// IdempotencyConfig configures an Idempotency.
type IdempotencyConfig struct {
	// Table holds the records (see CreateTable).
	Table string
	// Consumer names the consumer, as InboxConfig.Consumer does.
	Consumer string
	// Hold is how long an in-progress record keeps other copies out: make
	// it longer than the effect can run (a Lambda function's timeout).
	// Past it, a copy may take the record over and run the effect again.
	Hold time.Duration
	// TTL is how long a completed record is kept; 0 keeps it forever.
	TTL time.Duration
}

// Errors Idempotency.Do returns.
var (
	// ErrInProgress is for a message another copy of which is being
	// applied: retry it later.
	ErrInProgress = errors.New("another copy is in progress")
	// ErrHoldLost is for an effect that ran, but past its hold, so that
	// another copy may have taken the record over and run it too.
	ErrHoldLost = errors.New("the effect outlived its hold")
)

// Record statuses.
const (
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
)

// NewIdempotency returns an Idempotency for the consumer.
func NewIdempotency(api RecordAPI, cfg IdempotencyConfig) (*Idempotency, error) {
	switch {
	case api == nil:
		return nil, errors.New("idempotency: no DynamoDB client")
	case cfg.Table == "":
		return nil, errors.New("idempotency: no table")
	case !validConsumer(cfg.Consumer):
		return nil, fmt.Errorf("idempotency: consumer name %q must be non-empty, without spaces", cfg.Consumer)
	case cfg.Hold <= 0:
		return nil, errors.New("idempotency: Hold must be positive")
	case cfg.TTL < 0:
		return nil, errors.New("idempotency: TTL must not be negative")
	}
	return &Idempotency{api: api, table: cfg.Table, consumer: cfg.Consumer, hold: cfg.Hold, ttl: cfg.TTL, now: time.Now}, nil
}

// Do runs effect for the message unless this consumer completed it
// already (ErrDuplicate: acknowledge it) or another copy is running it
// (ErrInProgress: retry later). An effect that fails releases its record,
// so a retry runs it again; its error is returned as it is.
func (i *Idempotency) Do(ctx context.Context, m Message, effect func(ctx context.Context) error) error {
	if m.Key == "" {
		return errors.New("idempotency: a message without a key")
	}
	key := keyOf("idempotency " + i.consumer + " " + m.Key)
	token := rand.Text()
	if err := i.begin(ctx, key, token); err != nil {
		return fmt.Errorf("message %s: %w", m.Key, err)
	}
	effectErr := effect(ctx)
	// The record is written whatever became of ctx (a shutdown, a Lambda
	// deadline, the effect's own timeout): left in progress, it would let
	// the next copy run a completed effect again once the hold lapses, or
	// make the retry of a failed one wait out the whole hold.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWriteTimeout)
	defer cancel()
	if effectErr != nil {
		i.release(wctx, key, token)
		return effectErr
	}
	return i.complete(wctx, m.Key, key, token)
}

// recordWriteTimeout bounds the write that completes or releases a record
// after the effect, which no longer follows the caller's context.
const recordWriteTimeout = 10 * time.Second

// begin writes the in-progress record, unless a completed record or
// another copy's unexpired hold is there.
func (i *Idempotency) begin(ctx context.Context, key map[string]types.AttributeValue, token string) error {
	now := i.now()
	until := now.Add(i.hold)
	item := map[string]types.AttributeValue{
		attrStatus:    &types.AttributeValueMemberS{Value: statusInProgress},
		attrToken:     &types.AttributeValueMemberS{Value: token},
		attrHeldUntil: &types.AttributeValueMemberN{Value: strconv.FormatInt(until.UnixMilli(), 10)},
		// An abandoned hold is deleted in time too.
		AttrExpiresAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(until.Add(i.ttl).Unix()+1, 10)},
		attrConsumer:  &types.AttributeValueMemberS{Value: i.consumer},
	}
	for k, v := range key {
		item[k] = v
	}
	free := expression.AttributeNotExists(expression.Name(AttrPK)).Or(
		expression.Name(attrStatus).Equal(expression.Value(statusInProgress)).
			And(expression.Name(attrHeldUntil).LessThan(expression.Value(now.UnixMilli()))))
	expr, err := expression.NewBuilder().WithCondition(free).Build()
	if err != nil {
		return fmt.Errorf("idempotency: build condition: %w", err)
	}
	_, err = i.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(i.table), Item: item, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		if err != nil {
			return fmt.Errorf("write in-progress record: %w", err)
		}
		return nil
	}
	current := ccf.Item
	if len(current) == 0 {
		out, gerr := i.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(i.table), Key: key, ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return fmt.Errorf("read the record that refused the hold: %w", gerr)
		}
		current = out.Item
	}
	if s, ok := current[attrStatus].(*types.AttributeValueMemberS); ok && s.Value == statusCompleted {
		return ErrDuplicate
	}
	if t, ok := current[attrToken].(*types.AttributeValueMemberS); ok && t.Value == token {
		// The hold is this copy's own: the put applied, its answer was
		// lost, and the SDK's retry was refused by the record it wrote.
		// The token is random per call, so no other copy holds it.
		return nil
	}
	return ErrInProgress
}

// release deletes this copy's in-progress record after its effect
// failed, so a retry need not wait out the hold. If it fails, the hold
// expires.
func (i *Idempotency) release(ctx context.Context, key map[string]types.AttributeValue, token string) {
	expr, err := expression.NewBuilder().WithCondition(expression.Name(attrToken).Equal(expression.Value(token))).Build()
	if err != nil {
		return
	}
	_, _ = i.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(i.table), Key: key,
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
}

// complete marks the record completed, if this copy still holds it.
func (i *Idempotency) complete(ctx context.Context, msgKey string, key map[string]types.AttributeValue, token string) error {
	upd := expression.Set(expression.Name(attrStatus), expression.Value(statusCompleted)).
		Set(expression.Name(attrAt), expression.Value(i.now().UnixMilli())).
		Remove(expression.Name(attrHeldUntil))
	if i.ttl > 0 {
		upd = upd.Set(expression.Name(AttrExpiresAt), expression.Value(i.now().Add(i.ttl).Unix()))
	} else {
		upd = upd.Remove(expression.Name(AttrExpiresAt))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(expression.Name(attrToken).Equal(expression.Value(token))).Build()
	if err != nil {
		return fmt.Errorf("idempotency: build update: %w", err)
	}
	_, err = i.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(i.table), Key: key,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("message %s: %w: another copy may have run it too", msgKey, ErrHoldLost)
	}
	if err != nil {
		return fmt.Errorf("message %s: the effect ran; mark it completed: %w", msgKey, err)
	}
	return nil
}
