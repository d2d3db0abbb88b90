package dynamo_test

import (
	"context"
	"errors"
	"sync"
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

// publishAPI is the test endpoint's client counting puts; before is run
// ahead of the first put, as a racing publisher would.
type publishAPI struct {
	*dynamodb.Client
	mu     sync.Mutex
	puts   int
	before func()
}

func (p *publishAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	p.mu.Lock()
	p.puts++
	before := p.before
	p.before = nil
	p.mu.Unlock()
	if before != nil {
		before()
	}
	return p.Client.PutItem(ctx, in, opts...)
}

func (p *publishAPI) take() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.puts
	p.puts = 0
	return n
}

func published() dynamo.Published {
	return dynamo.Published{
		Routes:  map[string]string{"orders": "https://sqs.us-east-1.amazonaws.com/123456789012/orders"},
		Ordered: map[string]string{}, Shards: 4, MaxMessageBytes: 262144, UnsureWait: 159333 * time.Millisecond,
	}
}

func TestPublish_WritesOnlyWhenTheConfigurationChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	api := &publishAPI{Client: awstest.DynamoDB(t)}

	_, err := dynamo.ReadPublished(ctx, api, table)
	require.ErrorIs(t, err, dynamo.ErrNotPublished)
	require.ErrorContains(t, err, table, "the error names the table")

	first := published()
	wrote, err := dynamo.Publish(ctx, api, table, first, "sweep", t0)
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, 1, api.take())
	got, err := dynamo.ReadPublished(ctx, api, table)
	require.NoError(t, err)
	require.True(t, got.Same(first), "%v", got.Diff(first))
	require.Equal(t, int64(1), got.Revision)
	require.Equal(t, "sweep", got.PublishedBy)
	require.True(t, got.PublishedAt.Equal(t0))

	// A cold start with the same configuration: a read, no write.
	wrote, err = dynamo.Publish(ctx, api, table, first, "wake", t0.Add(time.Minute))
	require.NoError(t, err)
	require.False(t, wrote)
	require.Zero(t, api.take(), "an unchanged configuration is not written")
	again, err := dynamo.ReadPublished(ctx, api, table)
	require.NoError(t, err)
	require.Equal(t, got, again)

	// A deploy that adds an ordered route overwrites it.
	changed := published()
	changed.Routes["events.fifo"] = "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo"
	changed.Ordered["events.fifo"] = "skip"
	wrote, err = dynamo.Publish(ctx, api, table, changed, "sweep", t0.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, 1, api.take())
	got, err = dynamo.ReadPublished(ctx, api, table)
	require.NoError(t, err)
	require.True(t, got.Same(changed), "%v", got.Diff(changed))
	require.Equal(t, int64(2), got.Revision)
	require.Equal(t, []string{
		`route "events.fifo": published (https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo), missing here`,
		`ordered route "events.fifo": published skip, here unordered`,
	}, got.Diff(first))

	// A longer lease (a longer unsure wait) is written too, though no
	// producer or command compares it.
	longer := changed
	longer.UnsureWait = 20*time.Minute + time.Minute
	wrote, err = dynamo.Publish(ctx, api, table, longer, "sweep", t0.Add(2*time.Hour))
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, 1, api.take())
	got, err = dynamo.ReadPublished(ctx, api, table)
	require.NoError(t, err)
	require.Equal(t, longer.UnsureWait, got.UnsureWait)
	require.Empty(t, got.Diff(changed))
}

func TestPublish_ARacingPublisherIsComparedNotOverwrittenBlindly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	theirs := published()
	theirs.Shards = 8
	api := &publishAPI{Client: awstest.DynamoDB(t)}
	api.before = func() {
		_, err := dynamo.Publish(ctx, awstest.DynamoDB(t), table, theirs, "other", t0)
		require.NoError(t, err)
	}
	wrote, err := dynamo.Publish(ctx, api, table, published(), "mine", t0)
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, 2, api.take(), "the first put lost the race, the second wrote over what it read")
	got, err := dynamo.ReadPublished(ctx, api, table)
	require.NoError(t, err)
	require.True(t, got.Same(published()))
	require.Equal(t, int64(2), got.Revision, "the racing write counts")
}

// The item is the one Table.Config describes: the key and its
// attributes, of their types, and nothing an index, the stream filter or
// TTL reads.
func TestPublish_WritesTheItemTheSchemaDescribes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	db := awstest.DynamoDB(t)
	_, err := dynamo.Publish(ctx, db, table, published(), "sweep", t0)
	require.NoError(t, err)
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: s(dynamo.Table.Config.Key)}})
	require.NoError(t, err)
	schema := dynamo.Table.Config
	require.Len(t, out.Item, 1+len(schema.Attributes)+len(schema.Maps))
	for name, v := range out.Item {
		switch {
		case name == dynamo.AttrKey:
		case schema.Attributes[name] == types.ScalarAttributeTypeN:
			require.IsType(t, &types.AttributeValueMemberN{}, v, name)
		case schema.Attributes[name] == types.ScalarAttributeTypeS:
			require.IsType(t, &types.AttributeValueMemberS{}, v, name)
		default:
			require.Contains(t, schema.Maps, name)
			require.IsType(t, &types.AttributeValueMemberM{}, v, name)
		}
	}
	for _, ix := range dynamo.Table.Indexes {
		require.NotContains(t, out.Item, ix.PartitionKey, "index %s would hold it", ix.Name)
		require.NotContains(t, out.Item, ix.SortKey, "index %s would hold it", ix.Name)
	}
	require.NotContains(t, out.Item, dynamo.AttrStatus, "the stream filter passes pending items")
	require.NotContains(t, out.Item, dynamo.Table.TTLAttribute, "TTL would delete it")
}

func TestReadPublished_RefusesAnItemItCannotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		mutate func(map[string]types.AttributeValue)
		want   string
	}{
		{"a later format", func(it map[string]types.AttributeValue) { it[dynamo.AttrFormat] = n(2) }, "format 2: this outflow reads format 1"},
		{"shards as a string", func(it map[string]types.AttributeValue) { it[dynamo.AttrShards] = s("4") }, "shards: want a number"},
		{"a route that is not a string", func(it map[string]types.AttributeValue) {
			it[dynamo.AttrRoutes] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"orders": n(1)}}
		}, "routes.orders: want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table := awstest.NewTable(t)
			db := awstest.DynamoDB(t)
			_, err := dynamo.Publish(ctx, db, table, published(), "sweep", t0)
			require.NoError(t, err)
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{dynamo.AttrKey: s(dynamo.ConfigKey)}})
			require.NoError(t, err)
			tt.mutate(out.Item)
			_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: out.Item})
			require.NoError(t, err)
			_, err = dynamo.ReadPublished(ctx, db, table)
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, dynamo.ConfigKey)
			require.False(t, errors.Is(err, dynamo.ErrNotPublished))
		})
	}
}

func TestStage_RefusesAKeyReservedForAnItemThatIsNoRow(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	for _, key := range []string{dynamo.ConfigKey, dynamo.AuditKey, dynamo.GroupKey("events.fifo", "g")} {
		err := st.Stage(context.Background(), outbox.Row{Key: key, Queue: "orders", Payload: []byte("x")}, t0)
		require.ErrorContains(t, err, "is reserved", key)
	}
}

func TestAudit_LeavesThePublishedConfigurationAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, api := newAudit(t, 1, 100)
	_, err := dynamo.Publish(ctx, awstest.DynamoDB(t), st.Table(), published(), "sweep", t0)
	require.NoError(t, err)
	putShard(t, st, "stray", "7")
	putShard(t, st, "valid", "1")
	api.take()

	res, err := a.Run(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, 2, res.Scanned, "the due index holds the two rows only")
	require.Len(t, res.Found, 1)
	require.Equal(t, "stray", res.Found[0].Key)
	_, writes := api.take()
	require.ElementsMatch(t, []string{dynamo.AuditKey, "stray"}, writes)
	got, err := dynamo.ReadPublished(ctx, awstest.DynamoDB(t), st.Table())
	require.NoError(t, err)
	require.True(t, got.Same(published()))
}
