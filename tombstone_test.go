package outflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// TestTombstone_AProducerStillKnowsADeliveredKeyWhoseTombstoneDroppedItsPayload:
// a row delivered under the default retention is kept as a tombstone
// with neither its payload nor its attributes; a producer's retry of its
// key (by Put or Transact, under another trace context too) is still
// recognised as staged, and other content under the key is still a
// conflict.
func TestTombstone_AProducerStillKnowsADeliveredKeyWhoseTombstoneDroppedItsPayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	db := awstest.DynamoDB(t)
	p, err := outflow.NewProducer(db, outflow.Config{Table: table, Shards: 4, Ordered: []string{}})
	require.NoError(t, err)
	store, err := dynamo.New(db, dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace, policy.BatchLinger = 0, 5*time.Millisecond
	router, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"orders": awstest.NewQueue(t, false)}, 0)
	require.NoError(t, err)
	e, err := outbox.New(store, router, policy)
	require.NoError(t, err)

	row := outflow.Row{Key: "order-7-paid", Queue: "orders", Payload: []byte(`{"order":7,"email":"someone@example.com"}`),
		Attributes: map[string]string{"type": "paid"}}
	_, err = p.Put(ctx, row)
	require.NoError(t, err)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: row.Key}}})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: string(outbox.StatusDone)}, out.Item[dynamo.AttrStatus])
	require.NotContains(t, out.Item, dynamo.AttrPayload, "no personal data kept for the retention")
	require.NotContains(t, out.Item, dynamo.AttrAttributes)

	traced := row
	traced.Attributes = map[string]string{"type": "paid", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	otherPayload := row
	otherPayload.Payload = []byte(`{"order":8}`)
	otherAttrs := row
	otherAttrs.Attributes = map[string]string{"type": "refunded"}
	for _, tc := range []struct {
		name string
		row  outflow.Row
		// put and transact are what Put and Transact of the row give.
		put, transact error
	}{
		{"the same row", row, nil, outflow.ErrAlreadyStaged},
		{"the same row from another request", traced, nil, outflow.ErrAlreadyStaged},
		{"another payload", otherPayload, outflow.ErrKeyConflict, outflow.ErrKeyConflict},
		{"other attributes", otherAttrs, outflow.ErrKeyConflict, outflow.ErrKeyConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Put(ctx, tc.row)
			if tc.put == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.put)
			}
			_, err = p.Transact(ctx, nil, tc.row)
			require.ErrorIs(t, err, tc.transact)
		})
	}
	require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "no retry staged the key again")
}
