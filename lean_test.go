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
	"github.com/outflowhq/outflow/internal/dynamo"
)

// leanTable is publishedTable's configuration with lean on, or off.
func leanTable(t *testing.T, lean bool) string {
	t.Helper()
	table := awstest.NewTable(t)
	_, err := dynamo.Publish(context.Background(), awstest.DynamoDB(t), table, dynamo.Published{
		Routes:  map[string]string{"orders": pubOrders, "events.fifo": pubEvents},
		Ordered: map[string]string{"events.fifo": "block"}, Shards: 8, MaxMessageBytes: 100_000, Lean: lean,
	}, "sweep", time.Now())
	require.NoError(t, err)
	return table
}

// hasShard reports whether the stored item of key has due-index keys.
func hasShard(t *testing.T, table, key string) bool {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	require.NotNil(t, out.Item, key)
	_, ok := out.Item[dynamo.AttrShard]
	return ok
}

func TestProducer_StagesOnlyUnorderedRowsDueAtOnceOutsideTheDueIndexWhenTheDispatcherRunsLean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, lean := range []bool{true, false} {
		table := leanTable(t, lean)
		pub, err := outflow.LoadPublished(ctx, awstest.DynamoDB(t), table)
		require.NoError(t, err)
		require.Equal(t, lean, pub.Lean)
		cfg, err := pub.Apply(outflow.Config{})
		require.NoError(t, err)
		require.Equal(t, lean, cfg.Lean, "Apply takes the mode from the dispatcher")
		p, err := outflow.NewProducer(awstest.DynamoDB(t), cfg)
		require.NoError(t, err)

		keys, err := p.Put(ctx,
			outflow.Row{Key: "now", Queue: "orders", Payload: []byte("a")},
			outflow.Row{Key: "later", Queue: "orders", Payload: []byte("b"), NotBefore: time.Now().Add(time.Hour)},
			outflow.Row{Key: "placed", Queue: "events.fifo", Group: "g", Payload: []byte("c")},
		)
		require.NoError(t, err)
		require.Equal(t, []string{"now", "later", "placed"}, keys)
		item, err := p.TransactItem(outflow.Row{Key: "tx", Queue: "orders", Payload: []byte("d")})
		require.NoError(t, err)
		_, inTx := item.Put.Item[dynamo.AttrShard]

		require.Equal(t, !lean, hasShard(t, table, "now"), "an unordered row due at once (lean %v)", lean)
		require.Equal(t, !lean, inTx, "the transaction item too (lean %v)", lean)
		require.True(t, hasShard(t, table, "later"), "a delayed row is the sweep's to send when due")
		require.True(t, hasShard(t, table, "placed"), "an ordered row is the sweep's when its head settles")
	}
}

func TestPublishedApply_RefusesLeanTheDispatcherDoesNotRun(t *testing.T) {
	t.Parallel()
	pub, err := outflow.LoadPublished(context.Background(), awstest.DynamoDB(t), leanTable(t, false))
	require.NoError(t, err)
	_, err = pub.Apply(outflow.Config{Lean: true})
	require.ErrorIs(t, err, outflow.ErrPublishedMismatch)
	require.ErrorContains(t, err, "Lean: the dispatcher does not run lean")
}
