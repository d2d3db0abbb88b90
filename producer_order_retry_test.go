package outflow_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// lostResponseAPI commits the first TransactWriteItems and then reports
// it failed, as a client timeout after DynamoDB committed does.
type lostResponseAPI struct {
	dynamo.API
	lost atomic.Bool
}

func (a *lostResponseAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := a.API.TransactWriteItems(ctx, in, opts...)
	if err == nil && a.lost.CompareAndSwap(false, true) {
		return nil, errors.New("injected: operation timed out after the transaction committed")
	}
	return out, err
}

// TestPut_RetriedAfterALostResponseDoesNotStickItsGroup: the
// documented way to use Put is to retry it on error ("It is idempotent").
// For an ordered route, a Put whose transaction committed but whose
// response was lost (a client timeout) returns an error; by the time the
// producer retries, the wake (or a sweep) has delivered the row and
// deleted it (OUTFLOW_DONE_RETENTION=0; the default keeps it 24 h). The retry finds the
// key free and the row still the group's tail, and stages the key again
// with prev = its own key. That row waits for itself for ever, and so does
// every row the producer stages in the group afterwards: no dead letter,
// no blocked-group count, no alarm; the group is silently stuck.
//
// Violated: invariants 2 and 5 (a group stuck for ever behind a row whose
// predecessor, the earlier row of that key, was delivered; the chain holds
// a cycle).
//
// Expected: the producer's retry does not restage the key as its own
// successor (for example, StageOrderedItems treats a tail equal to the
// row's key as "staged already", or the transaction carries a
// ClientRequestToken), and the group's later rows are delivered.
func TestPut_RetriedAfterALostResponseDoesNotStickItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	api := &lostResponseAPI{API: awstest.DynamoDB(t)}
	p, err := outflow.NewProducer(api, outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
	sender, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": awstest.NewQueue(t, true)}, 0)
	require.NoError(t, err)
	e, err := outbox.New(store, sender, policy)
	require.NoError(t, err)

	created := outflow.Row{Key: "order-7-created", Queue: "events.fifo", Group: "order-7", Payload: []byte(`{"e":"created"}`)}
	_, err = p.Put(ctx, created)
	require.Error(t, err, "the response was lost")

	// Meanwhile the dispatcher delivers the row.
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)

	// The producer retries, then goes on with the aggregate's next event.
	_, err = p.Put(ctx, created)
	require.NoError(t, err)
	paid := outflow.Row{Key: "order-7-paid", Queue: "events.fifo", Group: "order-7", Payload: []byte(`{"e":"paid"}`)}
	_, err = p.Put(ctx, paid)
	require.NoError(t, err)

	for range 3 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	row, err := store.Get(ctx, paid.Key)
	require.NoError(t, err)
	if row != nil {
		again, _ := store.Get(ctx, created.Key)
		require.NotNil(t, again)
		t.Fatalf("order-7-paid is still %s after three sweeps, behind %s (seq %d, prev %q, %s, attempt %d): a row that waits for itself",
			row.Status, again.Key, again.Seq, again.Prev, again.Status, again.Attempt)
	}
}
