package dynamo_test

// Adversarial review of the purge hold (71ba2ec): the published unsure wait.

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// HOLDS? For many leases and lingers (waits with ns fractions), a second
// cold start with the same configuration writes nothing; an item from
// before the field is rewritten once, then left; a lease change writes;
// Diff never reports the wait.
func TestAdv_PublishIsStableForEveryLeaseAndRepublishesAChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := &publishAPI{Client: awstest.DynamoDB(t)}
	for _, tc := range []struct{ lease, linger time.Duration }{
		{5 * time.Minute, 2 * time.Second}, {time.Hour, 0}, {time.Hour, 7 * time.Millisecond},
		{3001 * time.Millisecond, 0}, {10*time.Second + 1, 1}, {7 * time.Second, 3*time.Second + 999999},
	} {
		table := awstest.NewTable(t)
		p := outbox.DefaultPolicy()
		p.Lease, p.BatchLinger = tc.lease, tc.linger
		pub := published()
		pub.UnsureWait = p.UnsureWait()

		// An item from before the field.
		old := pub
		old.UnsureWait = 0
		wrote, err := dynamo.Publish(ctx, api, table, old, "old", t0)
		require.NoError(t, err)
		require.True(t, wrote)
		api.take()
		wrote, err = dynamo.Publish(ctx, api, table, pub, "new", t0)
		require.NoError(t, err)
		require.True(t, wrote, "%v: the field is added", tc)
		for range 3 {
			wrote, err = dynamo.Publish(ctx, api, table, pub, "new", t0)
			require.NoError(t, err)
			require.False(t, wrote, "%v: a cold start with the same configuration writes nothing", tc)
		}
		got, err := dynamo.ReadPublished(ctx, api, table)
		require.NoError(t, err)
		require.GreaterOrEqual(t, got.UnsureWait, p.UnsureWait(), "%v: never shorter than the dispatcher's", tc)
		require.Less(t, got.UnsureWait-p.UnsureWait(), time.Millisecond)
		require.Empty(t, got.Diff(pub))
		require.Empty(t, got.Diff(old))

		p.Lease += time.Millisecond
		changed := pub
		changed.UnsureWait = p.UnsureWait()
		wrote, err = dynamo.Publish(ctx, api, table, changed, "new", t0)
		require.NoError(t, err)
		if dynamoCeil(changed.UnsureWait) != dynamoCeil(pub.UnsureWait) {
			require.True(t, wrote, "%v: a lease change republishes", tc)
		}
	}
}

func dynamoCeil(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// HOLDS? An item published by an older outflow (no unsure_wait_ms) reads,
// with UnsureWait zero.
func TestAdv_AnItemWithoutTheFieldReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	api := awstest.DynamoDB(t)
	_, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		dynamo.AttrKey: &types.AttributeValueMemberS{Value: dynamo.ConfigKey}, dynamo.AttrFormat: &types.AttributeValueMemberN{Value: "1"},
		dynamo.AttrRoutes:  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"orders": &types.AttributeValueMemberS{Value: "https://q"}}},
		dynamo.AttrOrdered: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
		dynamo.AttrShards:  &types.AttributeValueMemberN{Value: "4"}, dynamo.AttrMaxMessageBytes: &types.AttributeValueMemberN{Value: "262144"},
		dynamo.AttrRevision: &types.AttributeValueMemberN{Value: "3"}, dynamo.AttrPublishedAt: &types.AttributeValueMemberN{Value: "1796276400000"},
	}})
	require.NoError(t, err)
	got, err := dynamo.ReadPublished(ctx, api, table)
	require.NoError(t, err)
	require.Zero(t, got.UnsureWait)
	require.Equal(t, 4, got.Shards)
}
