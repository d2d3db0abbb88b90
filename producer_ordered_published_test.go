package outflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// A producer built with only its table (docs/staging.md's first snippet)
// used to stage a row of an ordered route without its place, and the
// consumer applied it in no order. Now a Config without Ordered reads the
// routes the dispatcher publishes, and with none published it refuses
// rows of FIFO routes rather than guess.
func TestProducer_WithoutOrderedRoutesReadsThePublishedOnesOrRefusesFIFORows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table})
	require.NoError(t, err)

	// Phase 1: nothing published yet.
	_, err = p.Put(ctx, outflow.Row{Key: "a1", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)})
	require.ErrorIs(t, err, outflow.ErrOrderUnknown)
	require.ErrorIs(t, err, outflow.ErrNotPublished)
	_, err = p.Put(ctx, outflow.Row{Key: "s1", Queue: "orders", Payload: []byte(`{}`)})
	require.NoError(t, err, "a standard route is never ordered: no need to know")

	// Phase 2: the dispatcher publishes events.fifo as ordered; the
	// producer reads it and stages the group's rows in their places.
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	_, err = dynamo.Publish(ctx, awstest.DynamoDB(t), table, dynamo.Published{Routes: map[string]string{"events.fifo": "https://sqs.us-east-1.amazonaws.com/1/events.fifo", "orders": "https://sqs.us-east-1.amazonaws.com/1/orders"},
		Ordered: map[string]string{"events.fifo": string(outbox.DeadHeadBlock)}, Shards: 4, MaxMessageBytes: 262144}, "test", time.Now())
	require.NoError(t, err)
	_, err = p.Put(ctx, outflow.Row{Key: "a1", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)},
		outflow.Row{Key: "a2", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)})
	require.NoError(t, err)
	for i, k := range []string{"a1", "a2"} {
		row, err := store.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, int64(i+1), row.Seq, "%s has its place", k)
	}
	_, err = p.TransactItem(outflow.Row{Key: "a3", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)})
	require.ErrorIs(t, err, outflow.ErrOrderedRoute, "TransactItem knows the route is ordered too")

	// An empty list says no route is ordered: no read, no refusal.
	none, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: awstest.NewTable(t), Ordered: []string{}})
	require.NoError(t, err)
	_, err = none.Put(ctx, outflow.Row{Key: "b1", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)})
	require.NoError(t, err)
}
