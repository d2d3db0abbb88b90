package outflow_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/moto"
)

// txHarness is an outbox table with a producer (events.fifo ordered) and
// a business table beside it, as an application has.
type txHarness struct {
	p        *outflow.Producer
	store    *dynamo.Store
	client   *dynamodb.Client
	table    string // the outbox
	business string
}

func newTxHarness(t *testing.T) *txHarness {
	t.Helper()
	table := awstest.NewTable(t)
	client := awstest.DynamoDB(t)
	p, err := outflow.NewProducer(client, outflow.Config{Table: table, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(client, dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	return &txHarness{p: p, store: store, client: client, table: table, business: awstest.NewTable(t)}
}

func strKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}

// placeOrder is the business write: order pk goes from version 1 to 2.
func (h *txHarness) placeOrder(pk string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(h.business), Key: strKey(pk),
		UpdateExpression:          aws.String("SET version = :new"),
		ConditionExpression:       aws.String("version = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":old": &types.AttributeValueMemberN{Value: "1"}, ":new": &types.AttributeValueMemberN{Value: "2"}},
	}}
}

// version reads a business item's version, "" when it is absent.
func (h *txHarness) version(t *testing.T, pk string) string {
	t.Helper()
	out, err := h.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(h.business), Key: strKey(pk), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	if v, ok := out.Item["version"].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

func (h *txHarness) seedOrder(t *testing.T, pk, version string) {
	t.Helper()
	item := strKey(pk)
	item["version"] = &types.AttributeValueMemberN{Value: version}
	_, err := h.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(h.business), Item: item})
	require.NoError(t, err)
}

// payload reads an outbox row's payload, nil when it is not staged.
func (h *txHarness) payload(t *testing.T, key string) []byte {
	t.Helper()
	row, err := h.store.Get(context.Background(), key)
	require.NoError(t, err)
	if row == nil {
		return nil
	}
	return row.Payload
}

func injectConflict(t *testing.T, table, key string) {
	t.Helper()
	if os.Getenv(awstest.EndpointEnv) != "" {
		t.Skip("only the moto server the tests start injects transaction conflicts")
	}
	require.NoError(t, moto.InjectTransactionConflict(context.Background(), awstest.Endpoint(), table, key))
}

func TestTransact_ExplainsEachWayATransactionLosesAndStagesNothing(t *testing.T) {
	t.Parallel()
	row := func(payload string) outflow.Row {
		return outflow.Row{Key: "msg-1", Queue: "orders", Payload: []byte(payload)}
	}
	tests := []struct {
		name      string
		setup     func(t *testing.T, h *txHarness)
		send      func(t *testing.T, h *txHarness) error
		want      error
		notWant   error
		index     int
		detail    string
		retryable bool
		// what the tables hold after: msg-1's payload (nil: not staged)
		// and order-1's version ("": absent)
		payload []byte
		version string
	}{
		{
			name: "same row already staged",
			setup: func(t *testing.T, h *txHarness) {
				h.seedOrder(t, "order-1", "1")
				_, err := h.p.Put(context.Background(), row("placed"))
				require.NoError(t, err)
			},
			send: func(t *testing.T, h *txHarness) error {
				_, err := h.p.Transact(context.Background(), txOf(h.placeOrder("order-1")), row("placed"))
				return err
			},
			want: outflow.ErrAlreadyStaged, notWant: outflow.ErrKeyConflict, index: 1,
			detail:  "item 1 (outbox row msg-1): row already staged with the same content",
			payload: []byte("placed"), version: "1",
		},
		{
			name: "other content under the key",
			setup: func(t *testing.T, h *txHarness) {
				h.seedOrder(t, "order-1", "1")
				_, err := h.p.Put(context.Background(), row("first"))
				require.NoError(t, err)
			},
			send: func(t *testing.T, h *txHarness) error {
				_, err := h.p.Transact(context.Background(), txOf(h.placeOrder("order-1")), row("second"))
				return err
			},
			want: outflow.ErrKeyConflict, notWant: outflow.ErrAlreadyStaged, index: 1,
			detail:  "item 1 (outbox row msg-1): key already staged with different content",
			payload: []byte("first"), version: "1",
		},
		{
			name:  "business condition fails",
			setup: func(t *testing.T, h *txHarness) { h.seedOrder(t, "order-1", "7") },
			send: func(t *testing.T, h *txHarness) error {
				_, err := h.p.Transact(context.Background(), txOf(h.placeOrder("order-1")), row("placed"))
				return err
			},
			want: outflow.ErrConditionFailed, notWant: outflow.ErrKeyConflict, index: 0,
			detail:  `key pk="order-1"): condition failed`,
			payload: nil, version: "7",
		},
		{
			name: "another transaction holds the outbox row",
			setup: func(t *testing.T, h *txHarness) {
				h.seedOrder(t, "order-1", "1")
				injectConflict(t, h.table, "msg-1")
			},
			send: func(t *testing.T, h *txHarness) error {
				_, err := h.p.Transact(context.Background(), txOf(h.placeOrder("order-1")), row("placed"))
				return err
			},
			want: outflow.ErrTransactionConflict, notWant: outflow.ErrConditionFailed, index: 1, retryable: true,
			detail:  "item 1 (outbox row msg-1): transaction conflict",
			payload: nil, version: "1",
		},
		{
			name: "another transaction holds the business item",
			setup: func(t *testing.T, h *txHarness) {
				h.seedOrder(t, "order-1", "1")
				injectConflict(t, h.business, "order-1")
			},
			send: func(t *testing.T, h *txHarness) error {
				_, err := h.p.Transact(context.Background(), txOf(h.placeOrder("order-1")), row("placed"))
				return err
			},
			want: outflow.ErrTransactionConflict, notWant: outflow.ErrConditionFailed, index: 0, retryable: true,
			detail:  `key pk="order-1"): transaction conflict`,
			payload: nil, version: "1",
		},
		{
			name: "the ordered group's tail moved",
			setup: func(t *testing.T, h *txHarness) {
				h.seedOrder(t, "order-1", "1")
			},
			send: func(t *testing.T, h *txHarness) error {
				ctx := context.Background()
				items, err := h.p.TransactItems(ctx, outflow.Row{Key: "msg-1", Queue: "events.fifo", Group: "g", Payload: []byte("placed")})
				require.NoError(t, err)
				// Another producer stages into the group after the tail was read.
				_, err = h.p.Put(ctx, outflow.Row{Key: "other", Queue: "events.fifo", Group: "g", Payload: []byte("x")})
				require.NoError(t, err)
				sent := append([]types.TransactWriteItem{h.placeOrder("order-1")}, items...)
				_, err = h.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: sent})
				return h.p.Classify(ctx, err, sent)
			},
			want: outflow.ErrGroupRace, notWant: outflow.ErrKeyConflict, index: 2, retryable: true,
			detail:  `item 2 (tail of group "g" of events.fifo): another producer staged into the group first`,
			payload: nil, version: "1",
		},
		{
			name: "same ordered row already staged",
			setup: func(t *testing.T, h *txHarness) {
				h.seedOrder(t, "order-1", "1")
				_, err := h.p.Put(context.Background(), outflow.Row{Key: "msg-1", Queue: "events.fifo", Group: "g", Payload: []byte("placed")})
				require.NoError(t, err)
			},
			send: func(t *testing.T, h *txHarness) error {
				_, err := h.p.Transact(context.Background(), txOf(h.placeOrder("order-1")), outflow.Row{Key: "msg-1", Queue: "events.fifo", Group: "g", Payload: []byte("placed")})
				return err
			},
			want: outflow.ErrAlreadyStaged, notWant: outflow.ErrKeyConflict, index: 1,
			detail:  "item 1 (outbox row msg-1): row already staged with the same content",
			payload: []byte("placed"), version: "1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newTxHarness(t)
			tt.setup(t, h)
			err := tt.send(t, h)

			require.ErrorIs(t, err, tt.want)
			require.NotErrorIs(t, err, tt.notWant)
			require.ErrorContains(t, err, tt.detail)
			var canceled *types.TransactionCanceledException
			require.ErrorAs(t, err, &canceled, "the SDK's error stays reachable")
			var txErr *outflow.TransactError
			require.ErrorAs(t, err, &txErr)
			require.Len(t, txErr.Items, 1, "one item failed: %v", err)
			require.Equal(t, tt.index, txErr.Items[0].Index)
			require.Equal(t, tt.retryable, txErr.Retryable())
			var itemErr *outflow.ItemError
			require.ErrorAs(t, err, &itemErr)
			require.Equal(t, tt.index, itemErr.Index)
			if tt.index == 0 {
				require.Equal(t, h.business, itemErr.Table, "names the business table")
				require.ErrorContains(t, err, h.business)
			}

			require.Equal(t, tt.payload, h.payload(t, "msg-1"), "the outbox row is absent or as it was")
			require.Equal(t, tt.version, h.version(t, "order-1"), "the business item is as it was")
		})
	}
}

func txOf(items ...types.TransactWriteItem) *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{TransactItems: items}
}

func TestClassify_ReadsTheStagedRowWhenTheReasonCarriesNoItem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		want    error
	}{
		{"same content", "placed", outflow.ErrAlreadyStaged},
		{"other content", "changed", outflow.ErrKeyConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newTxHarness(t)
			_, err := h.p.Put(ctx, outflow.Row{Key: "msg-1", Queue: "orders", Payload: []byte("placed")})
			require.NoError(t, err)
			item, err := h.p.TransactItem(outflow.Row{Key: "msg-1", Queue: "orders", Payload: []byte(tt.payload)})
			require.NoError(t, err)
			// A caller that built its own put asks for no item back.
			item.Put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
			sent := []types.TransactWriteItem{item}
			_, err = h.client.TransactWriteItems(ctx, txOf(sent...))
			var canceled *types.TransactionCanceledException
			require.ErrorAs(t, err, &canceled)
			require.Empty(t, canceled.CancellationReasons[0].Item)
			require.ErrorIs(t, h.p.Classify(ctx, err, sent), tt.want)
		})
	}
}

func TestClassify_PassesOtherErrorsThrough(t *testing.T) {
	t.Parallel()
	h := newTxHarness(t)
	require.NoError(t, h.p.Classify(context.Background(), nil, nil))
	other := errors.New("throttled")
	require.Same(t, other, h.p.Classify(context.Background(), other, nil))
}

func TestTransact_CommitsRowsWithTheBusinessWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	h.seedOrder(t, "order-1", "1")
	in := txOf(h.placeOrder("order-1"))
	keys, err := h.p.Transact(ctx, in,
		outflow.Row{Queue: "orders", Payload: []byte("placed")},
		outflow.Row{Key: "e1", Queue: "events.fifo", Group: "g", Payload: []byte("1")},
	)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Len(t, keys[0], 26, "a generated ULID")
	require.Equal(t, "e1", keys[1])
	require.Len(t, in.TransactItems, 1, "the caller's input is not changed")
	require.Equal(t, "2", h.version(t, "order-1"))
	require.Equal(t, []byte("placed"), h.payload(t, keys[0]))
	require.Equal(t, []int64{1}, seqs(t, h.store, "e1"))
}

func TestTransact_RefusesBadRowsBeforeSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	h.seedOrder(t, "order-1", "1")
	tests := []struct {
		name   string
		rows   []outflow.Row
		want   error
		detail string
	}{
		{"an invalid row", []outflow.Row{{Queue: "orders", Payload: []byte("x")}, {Queue: "orders"}}, outflow.ErrEmptyPayload, "row 1"},
		{"two rows with one key", []outflow.Row{
			{Key: "k", Queue: "events.fifo", Group: "g", Payload: []byte("1")},
			{Queue: "orders", Payload: []byte("x")},
			{Key: "k", Queue: "orders", Payload: []byte("2")},
		}, outflow.ErrDuplicateKey, "rows 0 and 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := h.p.Transact(ctx, txOf(h.placeOrder("order-1")), tt.rows...)
			require.ErrorIs(t, err, tt.want)
			require.ErrorContains(t, err, tt.detail)
			require.Equal(t, "1", h.version(t, "order-1"), "nothing was sent")
		})
	}
}

// countingAPI counts the reads a producer makes over the real client.
type countingAPI struct {
	dynamo.API
	gets atomic.Int64
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.API.GetItem(ctx, in, opts...)
}

func TestClassify_ComparesTheItemDynamoDBReturnsWithoutAReadOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	api := &countingAPI{API: h.client}
	p, err := outflow.NewProducer(api, outflow.Config{Table: h.table})
	require.NoError(t, err)
	row := outflow.Row{Key: "msg-1", Queue: "orders", Payload: []byte("placed")}
	_, err = p.Put(ctx, row)
	require.NoError(t, err)
	before := api.gets.Load()
	_, err = p.Transact(ctx, txOf(), row)
	require.ErrorIs(t, err, outflow.ErrAlreadyStaged)
	require.Equal(t, before, api.gets.Load(), "the staged item came with the cancellation")
}
