package consume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow/consume"
)

// ledgerTable is the consumer's own table: its accounts, and beside them
// the inbox items and group cursors (a string partition key "pk", TTL on
// "expires_at"; consume.CreateTable makes one).
const ledgerTable = "ledger"

// payment is the payload the producer staged, one per row.
type payment struct {
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

// creditItem is the effect of one message: the account credited.
func creditItem(m consume.Message) (types.TransactWriteItem, error) {
	var p payment
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("message %s is not a payment: %w", m.Key, err)
	}
	if p.Account == "" {
		return types.TransactWriteItem{}, fmt.Errorf("message %s is a payment to no account", m.Key)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(ledgerTable),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "account " + p.Account}},
		UpdateExpression:          aws.String("ADD balance :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberN{Value: strconv.FormatInt(p.Cents, 10)}},
	}}, nil
}

// creditPayment is the effect of one message: the account credited, as items
// the inbox commits in one TransactWriteItems with the message's inbox
// item (and, for a row of an ordered group, the group's cursor), so the
// credit is made once, in the group's order. An error (a payload that is
// not a payment) fails the message each time it comes, until the
// queue's redrive policy takes it to the consumer's dead-letter queue.
func creditPayment(_ context.Context, m consume.Message) ([]types.TransactWriteItem, error) {
	item, err := creditItem(m)
	if err != nil {
		return nil, err
	}
	return []types.TransactWriteItem{item}, nil
}

// A container's consumer of an ordered route: a FIFO queue whose groups
// are accounts. Each payment is credited once, each account's in the
// order staged, until SIGTERM.
func ExamplePoller() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := consume.NewInbox(dynamodb.NewFromConfig(cfg), consume.InboxConfig{
		Table:    ledgerTable,
		Consumer: "ledger",
		// Longer than a copy can come late: the queue's retention, and
		// any redrive of Outflow's dead letters.
		TTL: 30 * 24 * time.Hour,
		// Gaps: GapWait, the default: Outflow sends every place as its
		// row or as a message closing it, so a gap closes.
	})
	if err != nil {
		log.Fatal(err)
	}
	// The URL says whether the queue keeps order: a .fifo queue's groups
	// are applied each in order, a standard queue's messages unordered
	// (duplicates are refused either way). The inbox wires itself: a
	// place that will not come (a dead letter, a purge) is recorded and
	// the group's cursor moves past it.
	p := inbox.Poller(sqs.NewFromConfig(cfg), "https://sqs.us-east-1.amazonaws.com/123456789012/payments.fifo", creditPayment)
	p.Concurrency = 8          // groups applied at once
	p.Visibility = time.Minute // renewed every 20 s while a batch is applied
	// What became of each message: applied, closed, duplicate and late
	// are deleted; gap, failed and skipped come again.
	p.OnResult = func(_ context.Context, r consume.Result) {
		switch r.Outcome {
		case consume.OutcomeLate:
			// Its group went past it (a dead letter redriven after its
			// place was closed): recorded, with late_after, not applied.
			log.Printf("payment %s came late and was not applied: %v", r.Message.Key, r.Err)
		case consume.OutcomeFailed:
			log.Printf("message %q not applied: %v", r.MessageID, r.Err)
		}
	}
	p.OnFailure = func(_ context.Context, messageID string, err error) {
		if messageID == "" {
			log.Printf("an SQS call failed: %v", err)
		}
	}

	// On SIGTERM (a container stopped) Run stops receiving, finishes the
	// messages it started, deletes the applied ones, gives the rest back
	// to the queue and returns.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := p.Run(ctx); err != nil {
		log.Print(err) // a Poller wired wrong: no API, QueueURL or Apply
	}
}
