package outflow_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// faultyTxAPI wraps the moto client; tx, when set, replaces
// TransactWriteItems and get, when set, replaces GetItem.
type faultyTxAPI struct {
	dynamo.API
	mu   sync.Mutex
	sent []*dynamodb.TransactWriteItemsInput
	tx   func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	get  func(ctx context.Context, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
}

func (a *faultyTxAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	a.mu.Lock()
	a.sent = append(a.sent, in)
	a.mu.Unlock()
	if a.tx != nil {
		return a.tx(ctx, in)
	}
	return a.API.TransactWriteItems(ctx, in, opts...)
}

func (a *faultyTxAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if a.get != nil {
		return a.get(ctx, in)
	}
	return a.API.GetItem(ctx, in, opts...)
}

func canceledWith(codes ...string) error {
	reasons := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		reasons[i] = types.CancellationReason{Code: aws.String(c), Message: aws.String(c + " message")}
	}
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

// A caller with only rows to stage may pass no input of its own: it
// panicked (found by review 13c).
func TestTransact_TakesANilInputAsNoWritesOfYours(t *testing.T) {
	t.Parallel()
	h := newTxHarness(t)
	var keys []string
	var err error
	require.NotPanics(t, func() {
		keys, err = h.p.Transact(context.Background(), nil, outflow.Row{Key: "nil-in", Queue: "orders", Payload: []byte("x")})
	})
	require.NoError(t, err)
	require.Equal(t, []string{"nil-in"}, keys)
	require.Equal(t, []byte("x"), h.payload(t, "nil-in"))
}

// A throttled item (the table or an index over its capacity) fails for no
// fault of the transaction: sending it again after a backoff may succeed,
// so Retryable says so (found by review 13c).
func TestTransactError_RetryableForAThrottledItem(t *testing.T) {
	t.Parallel()
	h := newTxHarness(t)
	for _, code := range []string{"ThrottlingError", "ProvisionedThroughputExceeded"} {
		t.Run(code, func(t *testing.T) {
			api := &faultyTxAPI{API: h.client, tx: func(context.Context, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				return nil, canceledWith("None", code)
			}}
			p, err := outflow.NewProducer(api, outflow.Config{Table: h.table})
			require.NoError(t, err)
			_, err = p.Transact(context.Background(), txOf(h.placeOrder("order-1")), outflow.Row{Key: "thr-1", Queue: "orders", Payload: []byte("x")})
			var txErr *outflow.TransactError
			require.ErrorAs(t, err, &txErr)
			require.True(t, txErr.Retryable(), "a throttled item may succeed when sent again: %v", err)
		})
	}
}

// An application that keeps its own items in the outbox table (single
// table design) under a key that reads "group <a> <b>", on no ordered
// route, gets its own failed condition as such: as a group race, Retryable
// would have sent it again for ever (found by review 13c).
func TestClassify_YourOwnUpdateOnTheOutboxTableIsNoGroupRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	key := strKey("group admins alice")
	item := strKey("group admins alice")
	item["version"] = &types.AttributeValueMemberN{Value: "7"}
	_, err := h.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(h.table), Item: item})
	require.NoError(t, err)
	own := types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(h.table), Key: key,
		UpdateExpression:          aws.String("SET version = :new"),
		ConditionExpression:       aws.String("version = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":old": &types.AttributeValueMemberN{Value: "1"}, ":new": &types.AttributeValueMemberN{Value: "2"}},
	}}
	_, err = h.p.Transact(ctx, txOf(own), outflow.Row{Key: "own-1", Queue: "orders", Payload: []byte("x")})
	require.ErrorIs(t, err, outflow.ErrConditionFailed, "the caller's own condition failed")
	require.NotErrorIs(t, err, outflow.ErrGroupRace)
	var txErr *outflow.TransactError
	require.ErrorAs(t, err, &txErr)
	require.False(t, txErr.Retryable(), "sending again fails the same way")
}

// A response lost after DynamoDB committed (a timeout, a reset
// connection) leaves the rows staged: Transact returns their keys with the
// error, so a caller whose keys were generated can look its rows up rather
// than stage them twice (found by review 13c).
func TestTransact_ReturnsTheKeysWhenTheOutcomeIsUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	api := &faultyTxAPI{API: h.client}
	api.tx = func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		if _, err := h.client.TransactWriteItems(ctx, in); err != nil {
			return nil, err
		}
		return nil, errors.New("read tcp: connection reset by peer") // committed, answer lost
	}
	p, err := outflow.NewProducer(api, outflow.Config{Table: h.table})
	require.NoError(t, err)
	keys, err := p.Transact(ctx, txOf(), outflow.Row{Queue: "orders", Payload: []byte("x")})
	require.Error(t, err)
	require.Len(t, keys, 1, "the generated key, so the caller can check whether the row was staged: %v", err)
	require.Equal(t, []byte("x"), h.payload(t, keys[0]))
}

// DynamoDB takes a resend under one ClientRequestToken for the same
// request only if it sends the same items, and Transact stages its rows
// anew on each call (created_at, due_at): a resend would fail with an
// unexplained IdempotentParameterMismatchException. Transact refuses the
// token, and sends nothing (found by review 13c).
func TestTransact_RefusesAClientRequestTokenItCannotHonour(t *testing.T) {
	t.Parallel()
	h := newTxHarness(t)
	api := &faultyTxAPI{API: h.client, tx: func(context.Context, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return &dynamodb.TransactWriteItemsOutput{}, nil
	}}
	p, err := outflow.NewProducer(api, outflow.Config{Table: h.table})
	require.NoError(t, err)
	in := txOf(h.placeOrder("order-1"))
	in.ClientRequestToken = aws.String("order-1-placed")
	_, err = p.Transact(context.Background(), in, outflow.Row{Key: "tok-1", Queue: "orders", Payload: []byte("placed")})
	require.ErrorContains(t, err, "ClientRequestToken")
	require.Empty(t, api.sent, "nothing sent")
}

// The key was taken when DynamoDB checked the condition, but the reason
// carried no item and the row is gone by the time Classify reads it
// (delivered and expired, or purged): Classify compared nothing, and says
// so with ErrKeyGone, not "different content" (found by review 13c).
func TestClassify_SaysTheKeyIsGoneWhenItsRowCannotBeRead(t *testing.T) {
	t.Parallel()
	h := newTxHarness(t)
	api := &faultyTxAPI{API: h.client,
		tx: func(context.Context, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			return nil, canceledWith("ConditionalCheckFailed")
		},
		get: func(context.Context, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{}, nil // gone
		}}
	p, err := outflow.NewProducer(api, outflow.Config{Table: h.table})
	require.NoError(t, err)
	_, err = p.Transact(context.Background(), txOf(), outflow.Row{Key: "gone-1", Queue: "orders", Payload: []byte("x")})
	require.Error(t, err)
	require.NotErrorIs(t, err, outflow.ErrKeyConflict, "nothing was compared: %v", err)
	require.ErrorIs(t, err, outflow.ErrKeyGone)
}

// A lost group race says which call builds the items again: Transact
// builds the rows' items itself, so its caller calls it again; a caller
// who sent TransactItems' items in a transaction of its own builds them
// again with TransactItems (issue 50).
func TestItemError_AGroupRaceSaysWhichCallBuildsTheItemsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		send func(t *testing.T, p *outflow.Producer, api outflow.DynamoDB, row outflow.Row) error
		want string
	}{
		{"Transact", func(t *testing.T, p *outflow.Producer, _ outflow.DynamoDB, row outflow.Row) error {
			_, err := p.Transact(ctx, nil, row)
			return err
		}, "another producer staged into the group first (call Transact again: it builds the rows' items anew)"},
		{"TransactItems and Classify", func(t *testing.T, p *outflow.Producer, api outflow.DynamoDB, row outflow.Row) error {
			items, err := p.TransactItems(ctx, row)
			require.NoError(t, err)
			_, err = api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return p.Classify(ctx, err, items)
		}, "another producer staged into the group first (build the row's items again with TransactItems)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newTxHarness(t)
			// Another producer stages into the group after the tail was
			// read, just before the transaction is sent.
			api := &faultyTxAPI{API: h.client}
			api.tx = func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				_, err := h.p.Put(ctx, outflow.Row{Queue: "events.fifo", Group: "g", Payload: []byte("first")})
				require.NoError(t, err)
				return h.client.TransactWriteItems(ctx, in)
			}
			p, err := outflow.NewProducer(api, outflow.Config{Table: h.table, Ordered: []string{"events.fifo"}})
			require.NoError(t, err)
			err = tt.send(t, p, api, outflow.Row{Key: "race-1", Queue: "events.fifo", Group: "g", Payload: []byte("x")})
			require.ErrorIs(t, err, outflow.ErrGroupRace)
			require.ErrorContains(t, err, `(tail of group "g" of events.fifo): `+tt.want)
		})
	}
}
