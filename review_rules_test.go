package outflow_test

// Adversarial review of "idempotent by key" (TestRev_*): hypotheses that
// held, kept as regressions.

import (
	"context"
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

// A producer's row may not pose as a marker.
func TestRev_AProducerRefusesAnOutflowClosedAttribute(t *testing.T) {
	t.Parallel()
	p, _, _ := newProducer(t)
	for _, name := range []string{"outflow.closed", "Outflow.Closed", "OUTFLOW.seq"} {
		_, err := p.Put(context.Background(), outflow.Row{Key: "k-" + name, Queue: "orders", Payload: []byte("x"), Attributes: map[string]string{name: "purged"}})
		require.Error(t, err, name)
	}
}

// Put, TransactItems and Transact retried after the first copy was
// delivered (kept done, the default): recognised, never a second place;
// different content under the key is a conflict.
func TestRev_RetriesOfADeliveredKeyFindItStaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
	router, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": awstest.NewQueue(t, true), "orders": awstest.NewQueue(t, false)}, 0)
	require.NoError(t, err)
	e, err := outbox.New(store, router, policy)
	require.NoError(t, err)

	ord := outflow.Row{Key: "o-1", Queue: "events.fifo", Group: "g", Payload: []byte(`{"a":1}`)}
	un := outflow.Row{Key: "u-1", Queue: "orders", Payload: []byte(`{"a":1}`)}
	tx := outflow.Row{Key: "t-1", Queue: "events.fifo", Group: "g", Payload: []byte(`{"a":2}`)}
	_, err = p.Put(ctx, ord, un)
	require.NoError(t, err)
	_, err = p.Transact(ctx, nil, tx)
	require.NoError(t, err)
	for range 3 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	for _, k := range []string{"o-1", "u-1", "t-1"} {
		r, err := store.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, outbox.StatusDone, r.Status, k)
	}
	tail, err := store.GroupTail(ctx, "events.fifo", "g")
	require.NoError(t, err)

	_, err = p.Put(ctx, ord, un)
	require.NoError(t, err, "the retry is recognised")
	_, err = p.Transact(ctx, nil, tx)
	require.ErrorIs(t, err, outflow.ErrAlreadyStaged)
	items, err := p.TransactItems(ctx, ord)
	require.NoError(t, err)
	_, err = awstest.DynamoDB(t).TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	require.ErrorIs(t, p.Classify(ctx, err, items), outflow.ErrAlreadyStaged)

	changed := ord
	changed.Payload = []byte(`{"a":9}`)
	_, err = p.Put(ctx, changed)
	require.ErrorIs(t, err, outflow.ErrKeyConflict)
	again, err := store.GroupTail(ctx, "events.fifo", "g")
	require.NoError(t, err)
	require.Equal(t, tail, again, "no retry took a place")
	require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)))
}
