package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/consume"
)

// ConsumeMode is what one of package consume's modes writes per message,
// computed from the writes recorded while it applied messages.
type ConsumeMode struct {
	Name string
	// WCU is the write units per message of the mode's writes and the
	// effect's, by the rules of Requests.WCU; Adds is WCU less what the
	// effect costs alone, as a plain write (Effect).
	WCU, Adds float64
	// Writes are the DynamoDB write requests per message.
	Writes float64
}

// ConsumeGroupSize is the length of the ordered groups ConsumeModes
// applies.
const ConsumeGroupSize = 10

// ConsumeModes applies n messages (each its first copy) against the
// endpoint in each of package consume's modes, with a one-item effect in
// DynamoDB (a counter's update) where the mode takes one, and returns the
// write units of each from the recorded writes: the effect alone as a
// plain UpdateItem first, then the Inbox on an unordered route (the
// effect and the inbox put in one transaction), on an ordered one (and the
// group cursor's update; groups of ConsumeGroupSize), and Idempotency
// (its records around an effect outside DynamoDB).
func ConsumeModes(ctx context.Context, endpoint string, n int) ([]ConsumeMode, error) {
	admin, err := endpointConfig(ctx, endpoint, NewRequests())
	if err != nil {
		return nil, err
	}
	table := "outflow-bench-consume-" + strings.ToLower(rand.Text()[:10])
	if err := consume.CreateTable(ctx, dynamodb.NewFromConfig(admin, noCRC), table); err != nil {
		return nil, err
	}
	defer func() {
		_, _ = dynamodb.NewFromConfig(admin, noCRC).DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	}()

	effect := func(key string) *types.Update {
		return &types.Update{
			TableName: aws.String(table), Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "effect " + key}},
			UpdateExpression:          aws.String("ADD applied :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}
	}
	msg := func(mode string, i int, ordered bool) consume.Message {
		m := consume.Message{Key: fmt.Sprintf("%s-%06d", mode, i), Attempt: 1, Payload: []byte(`{"n":1}`)}
		if ordered {
			m.Group, m.Seq = fmt.Sprintf("g%04d", i/ConsumeGroupSize), int64(i%ConsumeGroupSize+1)
		}
		return m
	}
	type mode struct {
		name  string
		apply func(db *dynamodb.Client, i int) error
		// inDynamoDB is whether the mode's effect is a DynamoDB write.
		inDynamoDB bool
	}
	modes := []mode{
		{"effect alone (plain UpdateItem)", func(db *dynamodb.Client, i int) error {
			u := effect(msg("plain", i, false).Key)
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ExpressionAttributeValues: u.ExpressionAttributeValues})
			return err
		}, true},
		{"Inbox, unordered route", inboxMode(ctx, table, "unordered", func(i int) consume.Message { return msg("unordered", i, false) }, effect), true},
		{"Inbox, ordered route", inboxMode(ctx, table, "ordered", func(i int) consume.Message { return msg("ordered", i, true) }, effect), true},
		{"Idempotency (effect outside DynamoDB)", func(db *dynamodb.Client, i int) error {
			idem, err := consume.NewIdempotency(db, consume.IdempotencyConfig{Table: table, Consumer: "bench", Hold: time.Minute})
			if err != nil {
				return err
			}
			return idem.Do(ctx, msg("idempotency", i, false), func(context.Context) error { return nil })
		}, false},
	}
	var out []ConsumeMode
	var alone float64
	for _, md := range modes {
		reqs := NewRequests()
		cfg, err := endpointConfig(ctx, endpoint, reqs)
		if err != nil {
			return nil, err
		}
		db := dynamodb.NewFromConfig(cfg, noCRC)
		for i := range n {
			if err := md.apply(db, i); err != nil {
				return nil, fmt.Errorf("%s: message %d: %w", md.name, i, err)
			}
		}
		res := ConsumeMode{Name: md.name, WCU: reqs.WCU(noIndex) / float64(n), Writes: float64(reqs.Total("DynamoDB", true)) / float64(n)}
		switch {
		case strings.HasPrefix(md.name, "effect alone"):
			alone = res.WCU
		case md.inDynamoDB:
			res.Adds = res.WCU - alone
		default:
			res.Adds = res.WCU
		}
		out = append(out, res)
	}
	return out, nil
}

// inboxMode applies message i with an Inbox, its effect in the
// transaction.
func inboxMode(ctx context.Context, table, consumer string, msg func(int) consume.Message, effect func(string) *types.Update) func(*dynamodb.Client, int) error {
	return func(db *dynamodb.Client, i int) error {
		in, err := consume.NewInbox(db, consume.InboxConfig{Table: table, Consumer: consumer})
		if err != nil {
			return err
		}
		m := msg(i)
		return in.Apply(ctx, m, types.TransactWriteItem{Update: effect(m.Key)})
	}
}
