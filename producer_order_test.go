package outflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

func newOrderedProducer(t *testing.T) (*outflow.Producer, *dynamo.Store) {
	t.Helper()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	return p, store
}

// seqs returns each key's place in its group, 0 for an unordered row.
func seqs(t *testing.T, store *dynamo.Store, keys ...string) []int64 {
	t.Helper()
	out := make([]int64, len(keys))
	for i, k := range keys {
		row, err := store.Get(context.Background(), k)
		require.NoError(t, err)
		require.NotNil(t, row, k)
		out[i] = row.Seq
	}
	return out
}

func TestNewProducer_RefusesAnOrderedRouteThatIsNotFIFO(t *testing.T) {
	t.Parallel()
	_, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: "t", Ordered: []string{"orders"}})
	require.ErrorContains(t, err, "only FIFO routes")
}

func TestPut_StagesAnOrderedRoutesRowsInTheGivenOrderPerGroup(t *testing.T) {
	t.Parallel()
	p, store := newOrderedProducer(t)
	ctx := context.Background()
	row := func(key, group string) outflow.Row {
		return outflow.Row{Key: key, Queue: "events.fifo", Group: group, Payload: []byte(key)}
	}
	_, err := p.Put(ctx, row("a1", "a"), row("b1", "b"), row("a2", "a"), row("a3", "a"), outflow.Row{Key: "u", Queue: "orders", Payload: []byte("u")})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 1, 0}, seqs(t, store, "a1", "a2", "a3", "b1", "u"))

	// The same rows again are staged already: no error, no new places.
	_, err = p.Put(ctx, row("a2", "a"))
	require.NoError(t, err)
	_, err = p.Put(ctx, row("a4", "a"))
	require.NoError(t, err)
	require.Equal(t, []int64{4}, seqs(t, store, "a4"))
}

func TestPut_StopsAnOrderedGroupAtItsFirstFailedRow(t *testing.T) {
	t.Parallel()
	p, store := newOrderedProducer(t)
	ctx := context.Background()
	_, err := p.Put(ctx,
		outflow.Row{Key: "g1", Queue: "events.fifo", Group: "g", Payload: []byte("1")},
		outflow.Row{Key: "g2", Queue: "events.fifo", Group: "g", Payload: nil}, // invalid
		outflow.Row{Key: "g3", Queue: "events.fifo", Group: "g", Payload: []byte("3")},
		outflow.Row{Key: "h1", Queue: "events.fifo", Group: "h", Payload: []byte("1")},
	)
	require.ErrorIs(t, err, outflow.ErrEmptyPayload)
	require.ErrorIs(t, err, outflow.ErrNotStaged)
	require.ErrorContains(t, err, "row 2")
	got, gerr := store.Get(ctx, "g3")
	require.NoError(t, gerr)
	require.Nil(t, got, "a row after a failed one in its group is not staged")
	require.Equal(t, []int64{1, 1}, seqs(t, store, "g1", "h1"))
}

func TestTransactItems_StagesAnOrderedRowWithItsGroupOrNotAtAll(t *testing.T) {
	t.Parallel()
	p, store := newOrderedProducer(t)
	ctx := context.Background()
	client := awstest.DynamoDB(t)

	items, err := p.TransactItems(ctx, outflow.Row{Key: "o1", Queue: "orders", Payload: []byte("x")})
	require.NoError(t, err)
	require.Len(t, items, 1, "an unordered row is one put")

	_, err = p.TransactItem(outflow.Row{Key: "e1", Queue: "events.fifo", Group: "g", Payload: []byte("x")})
	require.ErrorIs(t, err, outflow.ErrOrderedRoute)

	first, err := p.TransactItems(ctx, outflow.Row{Key: "e1", Queue: "events.fifo", Group: "g", Payload: []byte("1")})
	require.NoError(t, err)
	require.Len(t, first, 2, "an ordered row is its put and its group's update")
	raced, err := p.TransactItems(ctx, outflow.Row{Key: "e2", Queue: "events.fifo", Group: "g", Payload: []byte("2")})
	require.NoError(t, err)
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: first})
	require.NoError(t, err)
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: raced})
	var canceled *types.TransactionCanceledException
	require.True(t, errors.As(err, &canceled), "a transaction built on a stale tail is canceled: %v", err)

	again, err := p.TransactItems(ctx, outflow.Row{Key: "e2", Queue: "events.fifo", Group: "g", Payload: []byte("2")})
	require.NoError(t, err)
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: again})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, seqs(t, store, "e1", "e2"))
}

// An ordered row's message carries its place (outflow.seq), so a row of an
// ordered route has one attribute less than an unordered one.
func TestPut_AnOrderedRouteLeavesOneAttributeLessForTheRowsPlace(t *testing.T) {
	t.Parallel()
	p, _ := newOrderedProducer(t)
	ctx := context.Background()
	attrs := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["a"+string(rune('0'+i))] = "v"
		}
		return m
	}
	_, err := p.Put(ctx, outflow.Row{Key: "o8", Queue: "events.fifo", Group: "g", Payload: []byte("p"), Attributes: attrs(outflow.MaxOwnAttributes)})
	require.ErrorIs(t, err, outflow.ErrTooManyAttributes)
	_, err = p.Put(ctx, outflow.Row{Key: "o7", Queue: "events.fifo", Group: "g", Payload: []byte("p"), Attributes: attrs(outflow.MaxOrderedAttributes)})
	require.NoError(t, err)
	_, err = p.Put(ctx, outflow.Row{Key: "u8", Queue: "other.fifo", Group: "g", Payload: []byte("p"), Attributes: attrs(outflow.MaxOwnAttributes)})
	require.NoError(t, err, "an unordered route keeps its 8")
}
