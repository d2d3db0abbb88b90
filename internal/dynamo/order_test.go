package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func orderedRow(key, group string) outbox.Row {
	return outbox.Row{Key: key, Queue: "events.fifo", Group: group, Payload: []byte(`{}`)}
}

// chain reads a group's rows back from its tail and returns their keys in
// staging order, checking each seq is one more than its predecessor's.
func chain(t *testing.T, s *dynamo.Store, group string) []string {
	t.Helper()
	tail, err := s.GroupTail(context.Background(), "events.fifo", group)
	require.NoError(t, err)
	var keys []string
	for key, seq := tail.Key, tail.Seq; key != ""; seq-- {
		row, err := s.Get(context.Background(), key)
		require.NoError(t, err)
		require.NotNil(t, row, "row %s of the chain exists", key)
		require.Equal(t, seq, row.Seq, "row %s", key)
		keys = append([]string{key}, keys...)
		key = row.Prev
	}
	require.Len(t, keys, int(tail.Seq), "the chain from the tail reaches seq 1 with no gap")
	return keys
}

func TestStageOrdered_ConcurrentProducersChainAGroupWithoutGapsOrForks(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	const producers, each = 4, 6
	var wg sync.WaitGroup
	errs := make([][]error, producers) // each producer's own: require is for the test's goroutine
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				errs[p] = append(errs[p], s.StageOrdered(context.Background(), orderedRow(fmt.Sprintf("p%d-%d", p, i), "g"), t0))
			}
		})
	}
	wg.Wait()
	for p := range producers {
		require.NoError(t, errors.Join(errs[p]...), "producer %d", p)
	}
	keys := chain(t, s, "g")
	require.Len(t, keys, producers*each)
	// Each producer's own rows keep the order it staged them in.
	last := map[byte]byte{}
	for _, k := range keys {
		if prev, ok := last[k[1]]; ok {
			require.Greater(t, k[3], prev, "producer %c's rows in its order: %v", k[1], keys)
		}
		last[k[1]] = k[3]
	}
}

func TestStageOrdered_StagingAKeyAgainIsAConflictAndLeavesTheGroupAlone(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	require.NoError(t, s.StageOrdered(context.Background(), orderedRow("a", "g"), t0))
	err := s.StageOrdered(context.Background(), orderedRow("a", "g"), t0)
	var conflict *outbox.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.NotNil(t, conflict.Current)
	require.Equal(t, int64(1), conflict.Current.Seq)
	require.Equal(t, []string{"a"}, chain(t, s, "g"))
}

func TestStageOrderedItems_ALostRaceCancelsTheWholeTransaction(t *testing.T) {
	t.Parallel()
	db := awstest.DynamoDB(t)
	s, err := dynamo.New(db, dynamo.Config{Table: awstest.NewTable(t), Shards: 4})
	require.NoError(t, err)
	ctx := context.Background()
	tail, err := s.GroupTail(ctx, "events.fifo", "g")
	require.NoError(t, err)
	first, err := s.StageOrderedItems(orderedRow("first", "g"), t0, tail)
	require.NoError(t, err)
	second, err := s.StageOrderedItems(orderedRow("second", "g"), t0, tail) // read the same tail
	require.NoError(t, err)
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: first})
	require.NoError(t, err)
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: second})
	var canceled *types.TransactionCanceledException
	require.True(t, errors.As(err, &canceled), "want a canceled transaction, got %v", err)
	row, err := s.Get(ctx, "second")
	require.NoError(t, err)
	require.Nil(t, row, "the loser staged nothing")
	require.Equal(t, []string{"first"}, chain(t, s, "g"))
}

func TestStageChainItems_StagesRowsAfterTheTailWithOneMoveOfIt(t *testing.T) {
	t.Parallel()
	db := awstest.DynamoDB(t)
	s := newStore(t, 0)
	ctx := context.Background()
	require.NoError(t, s.StageOrdered(ctx, orderedRow("a", "g"), t0))
	tail, err := s.GroupTail(ctx, "events.fifo", "g")
	require.NoError(t, err)
	items, err := s.StageChainItems([]outbox.Row{orderedRow("b", "g"), orderedRow("c", "g"), orderedRow("d", "g")}, t0, tail)
	require.NoError(t, err)
	require.Len(t, items, 4, "three puts and one update of the group item")
	require.NotNil(t, items[3].Update)
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d"}, chain(t, s, "g"))

	// Built on the tail before it moved, the same chain loses whole.
	stale, err := s.StageChainItems([]outbox.Row{orderedRow("e", "g"), orderedRow("f", "g")}, t0, tail)
	require.NoError(t, err)
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: stale})
	var canceled *types.TransactionCanceledException
	require.ErrorAs(t, err, &canceled)
	require.Equal(t, "ConditionalCheckFailed", aws.ToString(canceled.CancellationReasons[2].Code), "the group item's condition")
	require.Equal(t, []string{"a", "b", "c", "d"}, chain(t, s, "g"))
}

func TestStageChainItems_RefusesAChainItCannotStage(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	tests := []struct {
		name   string
		rows   []outbox.Row
		detail string
	}{
		{"rows of two groups", []outbox.Row{orderedRow("a", "g"), orderedRow("b", "h")}, "one group"},
		{"a key twice", []outbox.Row{orderedRow("a", "g"), orderedRow("b", "g"), orderedRow("a", "g")}, "key given twice"},
		{"a row without a group", []outbox.Row{orderedRow("a", "")}, "needs a message group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := s.StageChainItems(tt.rows, t0, dynamo.Tail{})
			require.ErrorContains(t, err, tt.detail)
		})
	}
}

func TestStageOrdered_RefusesARowWithoutAGroup(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	require.ErrorContains(t, s.StageOrdered(context.Background(), orderedRow("a", ""), t0), "needs a message group")
}

func TestGroupTail_RefusesAMalformedGroupItem(t *testing.T) {
	t.Parallel()
	db := awstest.DynamoDB(t)
	s, err := dynamo.New(db, dynamo.Config{Table: awstest.NewTable(t), Shards: 4})
	require.NoError(t, err)
	_, err = db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: dynamo.GroupKey("events.fifo", "g")}, "tail": &types.AttributeValueMemberS{Value: "x"},
		"seq": &types.AttributeValueMemberS{Value: "1"},
	}})
	require.NoError(t, err)
	_, err = s.GroupTail(context.Background(), "events.fifo", "g")
	require.ErrorIs(t, err, dynamo.ErrMalformed)
	require.ErrorIs(t, s.StageOrdered(context.Background(), orderedRow("a", "g"), t0), dynamo.ErrMalformed)
}

func TestLink_ReadsStatusPredecessorPlaceAndFailureTime(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	ctx := context.Background()
	require.NoError(t, s.StageOrdered(ctx, orderedRow("a", "g"), t0))
	require.NoError(t, s.StageOrdered(ctx, orderedRow("b", "g"), t0))
	row := claim(t, s, "a", t0)
	require.NoError(t, s.DeadLetter(ctx, row, t0, []outbox.AttemptError{{At: t0, Attempt: 1, Message: "no"}}))

	tests := []struct {
		key  string
		want outbox.Link
	}{
		{"a", outbox.Link{Found: true, Status: outbox.StatusFailed, Attempt: 1, Queue: "events.fifo", Group: "g", FailedAt: t0, Seq: 1}},
		{"b", outbox.Link{Found: true, Status: outbox.StatusPending, Queue: "events.fifo", Group: "g", Prev: "a", Seq: 2, DueAt: t0}},
		{"nothing", outbox.Link{}},
	}
	for _, tt := range tests {
		got, err := s.Link(ctx, tt.key)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, tt.key)
	}
}
