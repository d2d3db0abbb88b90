package consume_test

import (
	"context"
	"encoding/json"
	"errors"
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

// applyPayment applies one message: the credit and the inbox item (and,
// for a row of an ordered group, the group's cursor) in one
// TransactWriteItems, so the credit is made once, in the group's order.
func applyPayment(inbox *consume.Inbox) func(context.Context, consume.Message) error {
	return func(ctx context.Context, m consume.Message) error {
		credit, err := creditItem(m)
		if err != nil {
			// It fails each time it comes, until the queue's redrive
			// policy takes it to the consumer's dead-letter queue.
			return err
		}
		err = inbox.Apply(ctx, m, credit)
		if errors.Is(err, consume.ErrLate) {
			// Its group went past it (a dead letter redriven after its
			// place was closed): recorded, with late_after, not applied.
			log.Printf("payment %s came late and was not applied: %v", m.Key, err)
		}
		// nil: credited now. ErrDuplicate (credited before) and ErrLate:
		// done, the poller deletes the message. ErrGap (an
		// *consume.OrderError): not its group's turn yet. Anything else (a
		// throttle, the credit's own refusal): the message comes back when
		// its visibility timeout lapses, and on a FIFO queue its group's
		// later messages wait behind it.
		return err
	}
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
	p := &consume.Poller{
		API: sqs.NewFromConfig(cfg),
		// The URL says whether the queue keeps order: a .fifo queue's
		// groups are applied each in order, a standard queue's messages
		// unordered (duplicates are refused either way).
		QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/payments.fifo",
		Apply:    applyPayment(inbox),
		// A place that will not come (a dead letter, a purge): recorded,
		// and the group's cursor moves past it.
		Closed:      inbox.Close,
		Concurrency: 8,           // groups applied at once
		Visibility:  time.Minute, // renewed every 20 s while a batch is applied
		OnFailure: func(_ context.Context, messageID string, err error) {
			log.Printf("message %q not applied: %v", messageID, err) // "": an SQS call failed
		},
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
