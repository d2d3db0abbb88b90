package outflow_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func TestRowValidate_EachBadInputGetsItsOwnError(t *testing.T) {
	t.Parallel()
	attrs := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[string(rune('a'+i))] = "v"
		}
		return m
	}
	ok := outflow.Row{Queue: "orders", Payload: []byte(`{"id":1}`)}
	tests := []struct {
		name   string
		mutate func(*outflow.Row)
		want   error
		detail string
	}{
		{"empty queue", func(r *outflow.Row) { r.Queue = " " }, outflow.ErrEmptyQueue, ""},
		{"key with space", func(r *outflow.Row) { r.Key = "order 1" }, outflow.ErrInvalidKey, "printable ASCII"},
		{"key too long", func(r *outflow.Row) { r.Key = strings.Repeat("k", 129) }, outflow.ErrInvalidKey, ""},
		{"empty payload", func(r *outflow.Row) { r.Payload = nil }, outflow.ErrEmptyPayload, ""},
		{"payload too large", func(r *outflow.Row) { r.Payload = make([]byte, 256*1024) }, outflow.ErrPayloadTooLarge, "over the 262144-byte limit"},
		{"binary payload grows past the limit", func(r *outflow.Row) { r.Payload = append([]byte{0xff}, make([]byte, 200*1024)...) }, outflow.ErrPayloadTooLarge, ""},
		{"nine attributes", func(r *outflow.Row) { r.Attributes = attrs(9) }, outflow.ErrTooManyAttributes, "at most 8"},
		{"eight attributes and a binary payload", func(r *outflow.Row) { r.Attributes, r.Payload = attrs(8), []byte{0} }, outflow.ErrTooManyAttributes, "SQS allows 10"},
		{"attribute name reserved", func(r *outflow.Row) { r.Attributes = map[string]string{"outflow.key": "x"} }, outflow.ErrAttributeName, "reserved outflow. prefix"},
		{"attribute name AWS", func(r *outflow.Row) { r.Attributes = map[string]string{"AWS.trace": "x"} }, outflow.ErrAttributeName, "reserved by AWS"},
		{"attribute name with space", func(r *outflow.Row) { r.Attributes = map[string]string{"my attr": "x"} }, outflow.ErrAttributeName, "letters, digits"},
		{"attribute name double period", func(r *outflow.Row) { r.Attributes = map[string]string{"a..b": "x"} }, outflow.ErrAttributeName, "period"},
		{"attribute value empty", func(r *outflow.Row) { r.Attributes = map[string]string{"type": ""} }, outflow.ErrAttributeValue, ""},
		{"fifo without group", func(r *outflow.Row) { r.Queue = "events.fifo" }, outflow.ErrGroupRequired, ""},
		{"fifo group with space", func(r *outflow.Row) { r.Queue, r.Group = "events.fifo", "tenant 1" }, outflow.ErrInvalidGroup, ""},
		{"group on a standard queue", func(r *outflow.Row) { r.Group = "g1" }, outflow.ErrGroupNotFIFO, "drop the group"},
	}
	require.NoError(t, ok.Validate(0))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := ok
			tt.mutate(&r)
			err := r.Validate(0)
			require.ErrorIs(t, err, tt.want)
			require.ErrorContains(t, err, tt.detail)
		})
	}
	valid := []outflow.Row{
		{Queue: "events.fifo", Group: "tenant-1", Payload: []byte("x")},
		{Queue: "orders", Payload: []byte("x"), Attributes: attrs(8)},
		{Queue: "orders", Payload: []byte{0, 1, 2}, Attributes: attrs(7)},
		{Queue: "orders", Payload: []byte("x"), NotBefore: time.Now().Add(time.Hour), Key: "order-42:v1"},
	}
	for _, r := range valid {
		require.NoError(t, r.Validate(0))
	}
}

// TestProducer_RefusesAGroupOnARouteThatIsNotFIFO: a group on a route
// whose name does not end in .fifo is refused by every way of staging, in
// outflow enqueue's words, and nothing is written: the dispatcher would
// send such a row with no message group, in no order.
func TestProducer_RefusesAGroupOnARouteThatIsNotFIFO(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, _ := newProducer(t)
	row := outflow.Row{Key: "stray-group", Queue: "orders", Group: "g1", Payload: []byte("x")}
	const want = `group "g1": route "orders" is not FIFO (its name does not end in .fifo), and only a FIFO queue or topic has message groups; drop the group`
	tests := []struct {
		name  string
		stage func() error
	}{
		{"Put", func() error { _, err := p.Put(ctx, row); return err }},
		{"TransactItem", func() error { _, err := p.TransactItem(row); return err }},
		{"TransactItems", func() error { _, err := p.TransactItems(ctx, row); return err }},
		{"Transact", func() error { _, err := p.Transact(ctx, &dynamodb.TransactWriteItemsInput{}, row); return err }},
		{"Validate", func() error { return row.Validate(0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.stage()
			require.ErrorIs(t, err, outflow.ErrGroupNotFIFO)
			require.ErrorContains(t, err, want)
		})
	}
	t.Cleanup(func() {
		got, err := store.Get(context.Background(), row.Key)
		require.NoError(t, err)
		require.Nil(t, got, "nothing staged")
	})
}

func newProducer(t *testing.T) (*outflow.Producer, *dynamo.Store, string) {
	t.Helper()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	return p, store, table
}

func TestPut_IsIdempotentForTheSameContentOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, _ := newProducer(t)
	row := outflow.Row{Key: "order-1", Queue: "orders", Payload: []byte(`{"id":1}`), Attributes: map[string]string{"type": "created"}}

	keys, err := p.Put(ctx, row)
	require.NoError(t, err)
	require.Equal(t, []string{"order-1"}, keys)
	_, err = p.Put(ctx, row)
	require.NoError(t, err, "the same row again is not an error")

	changed := row
	changed.Payload = []byte(`{"id":2}`)
	_, err = p.Put(ctx, changed)
	require.ErrorIs(t, err, outflow.ErrKeyConflict)

	got, err := store.Get(ctx, "order-1")
	require.NoError(t, err)
	require.Equal(t, []byte(`{"id":1}`), got.Payload, "the first content stands")
	require.Equal(t, outbox.StatusPending, got.Status)
}

func TestPut_GeneratesKeysAndReportsEachBadRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, _ := newProducer(t)
	keys, err := p.Put(ctx,
		outflow.Row{Queue: "orders", Payload: []byte("a")},
		outflow.Row{Queue: "", Payload: []byte("b")},
		outflow.Row{Queue: "orders", Payload: []byte("c")},
	)
	require.ErrorIs(t, err, outflow.ErrEmptyQueue)
	require.ErrorContains(t, err, "row 1")
	require.Len(t, keys[0], 26, "a ULID")
	require.Empty(t, keys[1])
	require.NotEqual(t, keys[0], keys[2])
	for _, k := range []string{keys[0], keys[2]} {
		got, err := store.Get(ctx, k)
		require.NoError(t, err)
		require.NotNil(t, got, "good rows are staged despite the bad one")
	}
}

func TestTransactItem_CommitsAndRollsBackWithTheBusinessWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, store, table := newProducer(t)
	client := awstest.DynamoDB(t)
	business := func(key string, cond *string) types.TransactWriteItem {
		// The business row lives in the same table here for brevity; any
		// table in the account works the same way.
		return types.TransactWriteItem{Put: &types.Put{
			TableName:           aws.String(table),
			Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}, "kind": &types.AttributeValueMemberS{Value: "order"}},
			ConditionExpression: cond,
		}}
	}

	item, err := p.TransactItem(outflow.Row{Key: "msg-1", Queue: "orders", Payload: []byte("placed")})
	require.NoError(t, err)
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{business("order#1", nil), item}})
	require.NoError(t, err)
	got, err := store.Get(ctx, "msg-1")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, got.Status, "committed together")

	item, err = p.TransactItem(outflow.Row{Key: "msg-2", Queue: "orders", Payload: []byte("placed again")})
	require.NoError(t, err)
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		business("order#1", aws.String("attribute_not_exists(pk)")), item,
	}})
	var canceled *types.TransactionCanceledException
	require.True(t, errors.As(err, &canceled), "got %v", err)
	got, err = store.Get(ctx, "msg-2")
	require.NoError(t, err)
	require.Nil(t, got, "the outbox row rolled back with the business write")

	_, err = p.TransactItem(outflow.Row{Queue: "events.fifo", Payload: []byte("x")})
	require.ErrorIs(t, err, outflow.ErrGroupRequired)
}

func TestRowValidate_SizesTheAttemptAtTheWidestTheBudgetAllows(t *testing.T) {
	t.Parallel()
	const limit = 1024
	key := "order-1"
	// At attempt 1 this message is exactly at the limit: body plus the
	// outflow.key and outflow.attempt attributes (name, type, value).
	fixed := len("outflow.key") + len("String") + len(key) + len("outflow.attempt") + len("Number") + len("1")
	r := outflow.Row{Key: key, Queue: "orders", Payload: []byte(strings.Repeat("x", limit-fixed))}
	// A budget of 10 or more sends it as attempt 10 one day, a byte over:
	// staging refuses it now, rather than the dispatcher dead-letter it then.
	require.ErrorIs(t, r.Validate(limit), outflow.ErrPayloadTooLarge)
	// Room for the widest attempt number any budget allows (1000) fits.
	r.Payload = r.Payload[:len(r.Payload)-3]
	require.NoError(t, r.Validate(limit))
}

func TestPut_RefusesARowWithNoRoomForItsDeliveryState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: awstest.NewTable(t), MaxMessageBytes: dynamo.MaxMessageBytes})
	require.NoError(t, err)
	// Within the message limit, but with the attributes the row's item
	// leaves no room for the claim and the error history.
	attrs := map[string]string{}
	for i := range 8 {
		attrs["a"+strconv.Itoa(i)] = strings.Repeat("v", 300)
	}
	row := outflow.Row{Key: "big", Queue: strings.Repeat("q", 3000), Payload: []byte(strings.Repeat("x", dynamo.MaxMessageBytes-3000)), Attributes: attrs}
	_, err = p.Put(ctx, row)
	require.ErrorIs(t, err, outflow.ErrItemTooLarge)
	_, err = p.TransactItem(row)
	require.ErrorIs(t, err, outflow.ErrItemTooLarge)
}
