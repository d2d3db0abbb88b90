package consume_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/consume"
)

// Decode a record of Lambda's SQS event, whichever way the row came: a
// queue route, an SNS topic (raw or enveloped), or an EventBridge rule.
func ExampleFromLambda() {
	key, attempt := "01J0ORDER", "1"
	rec := events.SQSMessage{MessageId: "m1", Body: `{"amount":5}`, MessageAttributes: map[string]events.SQSMessageAttribute{
		"outflow.key": {StringValue: &key, DataType: "String"}, "outflow.attempt": {StringValue: &attempt, DataType: "Number"}}}
	m, err := consume.FromLambda(rec)
	if err != nil {
		fmt.Println(err) // a *consume.DecodeError
		return
	}
	fmt.Println(m.Key, m.Attempt, string(m.Payload))
	// Output: 01J0ORDER 1 {"amount":5}
}

// The strong mode: the effect and the inbox item commit in one
// transaction. A duplicate is refused, and on an ordered group so is a
// message that is not the next.
func ExampleInbox_Apply() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return
	}
	db := dynamodb.NewFromConfig(cfg)
	inbox, err := consume.NewInbox(db, consume.InboxConfig{Table: "ledger", Consumer: "ledger", TTL: 30 * 24 * time.Hour})
	if err != nil {
		return
	}
	h := consume.Handler{Apply: func(ctx context.Context, m consume.Message) error {
		credit := types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String("ledger"),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "account " + m.Group}},
			UpdateExpression:          aws.String("ADD balance :a"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: "5"}},
		}}
		// nil: applied; ErrDuplicate: applied before, ErrLate: its group
		// went past it (the handler acks both); an *OrderError (ErrGap):
		// not its turn (the handler reports it failed).
		return inbox.Apply(ctx, m, credit)
	}, Closed: inbox.Close} // a purged row's place: the cursor moves past it
	_ = h // lambda.Start(h.Handle)
}

// Run the inbox's items in a transaction of your own.
func ExampleInbox_TransactItems() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return
	}
	db := dynamodb.NewFromConfig(cfg)
	inbox, err := consume.NewInbox(db, consume.InboxConfig{Table: "orders", Consumer: "shipping"})
	if err != nil {
		return
	}
	var m consume.Message // from FromLambda, FromQueue or FromSQS
	items, err := inbox.TransactItems(m)
	if err != nil {
		return
	}
	tx := append([]types.TransactWriteItem{ /* your effect's items */ }, items...)
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	switch err = inbox.Classify(ctx, m, tx, err); {
	case err == nil, errors.Is(err, consume.ErrDuplicate):
		// applied, now or before: delete the message
	default:
		// retry later
	}
}

// A side effect outside DynamoDB, guarded by an idempotency record.
func ExampleIdempotency_Do() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return
	}
	idem, err := consume.NewIdempotency(dynamodb.NewFromConfig(cfg), consume.IdempotencyConfig{
		Table: "consumer", Consumer: "mailer", Hold: 2 * time.Minute, TTL: 7 * 24 * time.Hour})
	if err != nil {
		return
	}
	var m consume.Message
	err = idem.Do(ctx, m, func(ctx context.Context) error {
		return nil // send the mail, with m.Key as the mail service's idempotency key if it has one
	})
	_ = err // nil or ErrDuplicate: done; ErrInProgress: retry later
}
