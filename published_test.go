package outflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

const (
	pubOrders = "http://localhost:1/000000000000/orders"
	pubEvents = "http://localhost:1/000000000000/events.fifo"
)

// publishedTable is a table whose dispatcher published two routes, one
// ordered, 8 shards and a 100,000-byte limit.
func publishedTable(t *testing.T) string {
	t.Helper()
	table := awstest.NewTable(t)
	_, err := dynamo.Publish(context.Background(), awstest.DynamoDB(t), table, dynamo.Published{
		Routes:  map[string]string{"orders": pubOrders, "events.fifo": pubEvents},
		Ordered: map[string]string{"events.fifo": "block"}, Shards: 8, MaxMessageBytes: 100_000,
	}, "sweep", time.Now())
	require.NoError(t, err)
	return table
}

func TestLoadPublished_GivesTheProducerTheDispatchersSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := publishedTable(t)
	pub, err := outflow.LoadPublished(ctx, awstest.DynamoDB(t), table)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"orders": pubOrders, "events.fifo": pubEvents}, pub.Routes)
	require.Equal(t, map[string]string{"events.fifo": "block"}, pub.Ordered)
	require.Equal(t, int64(1), pub.Revision)
	require.Equal(t, "sweep", pub.PublishedBy)

	cfg, err := pub.Apply(outflow.Config{})
	require.NoError(t, err)
	require.Equal(t, table, cfg.Table)
	require.Equal(t, 8, cfg.Shards)
	require.Equal(t, 100_000, cfg.MaxMessageBytes)
	require.Equal(t, "events.fifo="+pubEvents+",orders="+pubOrders, cfg.Routes)
	require.Equal(t, []string{"events.fifo"}, cfg.Ordered)
	require.False(t, cfg.Lean)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), cfg)
	require.NoError(t, err)

	_, err = p.Put(ctx, outflow.Row{Queue: "ordres", Payload: []byte("x")})
	require.ErrorIs(t, err, outflow.ErrNoRoute, "a route the dispatcher does not have")
	require.ErrorContains(t, err, `route "ordres" is not one of the routes the dispatcher published in table `+table+` (events.fifo, orders)`,
		"the table and its published routes, as outflow enqueue names them")
	_, err = p.Put(ctx, outflow.Row{Queue: "orders", Payload: []byte(strings.Repeat("x", 100_001))})
	require.ErrorIs(t, err, outflow.ErrPayloadTooLarge, "the dispatcher's limit, not the default")

	keys, err := p.Put(ctx, outflow.Row{Queue: "events.fifo", Group: "g1", Payload: []byte("a")}, outflow.Row{Queue: "orders", Payload: []byte("b")})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 8})
	require.NoError(t, err)
	ordered, err := store.Get(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, int64(1), ordered.Seq, "staged in its group's chain: the route is ordered")
	plain, err := store.Get(ctx, keys[1])
	require.NoError(t, err)
	require.Zero(t, plain.Seq)
}

func TestPublishedApply_RefusesAConfigThatDiffers(t *testing.T) {
	t.Parallel()
	pub, err := outflow.LoadPublished(context.Background(), awstest.DynamoDB(t), publishedTable(t))
	require.NoError(t, err)
	tests := []struct {
		name string
		cfg  outflow.Config
		want string // "" accepted
	}{
		{"the same, given in full", outflow.Config{Shards: 8, MaxMessageBytes: 100_000, Routes: "orders=" + pubOrders + ",events.fifo=" + pubEvents, Ordered: []string{"events.fifo"}}, ""},
		{"other shards", outflow.Config{Shards: 4}, "Shards: published 8, Config has 4"},
		{"another size limit", outflow.Config{MaxMessageBytes: 262144}, "MaxMessageBytes: published 100000, Config has 262144"},
		{"a route missing", outflow.Config{Routes: "orders=" + pubOrders}, `route "events.fifo": published (` + pubEvents + `), missing here`},
		{"a route elsewhere", outflow.Config{Routes: "orders=http://localhost:1/000000000000/other,events.fifo=" + pubEvents}, `route "orders": published ` + pubOrders + `, here http://localhost:1/000000000000/other`},
		{"no ordered route", outflow.Config{Ordered: []string{}}, "Ordered: published events.fifo, Config has none"},
		{"another table", outflow.Config{Table: "other"}, "table: published in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := pub.Apply(tt.cfg)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, outflow.ErrPublishedMismatch)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestLoadPublished_NoneIsErrNotPublished(t *testing.T) {
	t.Parallel()
	table := awstest.NewTable(t)
	_, err := outflow.LoadPublished(context.Background(), awstest.DynamoDB(t), table)
	require.ErrorIs(t, err, outflow.ErrNotPublished)
	require.ErrorContains(t, err, table)
}

// ownClient is a DynamoDB client of the producer's own that wraps the
// SDK's, as a test double or an instrumented client would: no region or
// endpoint to read from it.
type ownClient struct{ outflow.DynamoDB }

// TestLoadPublished_NamesATableThatDoesNotExist: a wrong table name (or
// region, or endpoint) reads as that, naming the table and, where the
// client tells, the region and the endpoint it was looked for in, not as
// the SDK's bare ResourceNotFoundException; which it still wraps.
func TestLoadPublished_NamesATableThatDoesNotExist(t *testing.T) {
	t.Parallel()
	table := awstest.UniqueName("outflow-nosuch")
	region := awstest.DynamoDB(t).Options().Region
	tests := []struct {
		name   string
		client outflow.DynamoDB
		want   string
	}{
		{"the SDK's client", awstest.DynamoDB(t),
			`table "` + table + `": not found in region ` + region + ` at endpoint ` + awstest.Endpoint() + ` (ResourceNotFoundException)`},
		{"a client of your own", ownClient{awstest.DynamoDB(t)},
			`table "` + table + `": not found (ResourceNotFoundException)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := outflow.LoadPublished(context.Background(), tt.client, table)
			require.EqualError(t, err, tt.want)
			var missing *types.ResourceNotFoundException
			require.ErrorAs(t, err, &missing, "the SDK's error, wrapped")
			require.NotErrorIs(t, err, outflow.ErrNotPublished, "no table is not an empty one")

			// A producer that reads its ordered routes from the published
			// configuration names the table the same way.
			p, err := outflow.NewProducer(tt.client, outflow.Config{Table: table})
			require.NoError(t, err)
			_, err = p.Put(context.Background(), outflow.Row{Queue: "orders.fifo", Group: "g", Payload: []byte("x")})
			require.ErrorIs(t, err, outflow.ErrOrderUnknown)
			require.ErrorContains(t, err, tt.want)
			require.ErrorAs(t, err, &missing)
		})
	}
}

// TestProducer_NamesWhereItsRoutesCameFromForAnUnknownRoute: a row of a
// route the producer does not have is refused listing its routes, and
// where they are the ones the dispatcher published, naming the table, as
// outflow enqueue does; routes given by hand, or changed after Apply, are
// called given.
func TestProducer_NamesWhereItsRoutesCameFromForAnUnknownRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := publishedTable(t)
	pub, err := outflow.LoadPublished(ctx, awstest.DynamoDB(t), table)
	require.NoError(t, err)
	published, err := pub.Apply(outflow.Config{})
	require.NoError(t, err)
	agreeing, err := pub.Apply(outflow.Config{Routes: "orders=" + pubOrders + ",events.fifo=" + pubEvents})
	require.NoError(t, err)
	changed := published
	changed.Routes = "orders=" + pubOrders
	changed.Ordered = []string{}
	tests := []struct {
		name string
		cfg  outflow.Config
		want string
	}{
		{"routes read from the published configuration", published,
			`no such route: route "order-events" is not one of the routes the dispatcher published in table ` + table + ` (events.fifo, orders)`},
		{"routes given that agree with the published ones", agreeing,
			`no such route: route "order-events" is not one of the routes the dispatcher published in table ` + table + ` (events.fifo, orders)`},
		{"routes changed after Apply", changed,
			`no such route: route "order-events" is not one of the routes given (orders)`},
		{"routes given by hand", outflow.Config{Table: table, Routes: "orders=" + pubOrders + ",events.fifo=" + pubEvents, Ordered: []string{}},
			`no such route: route "order-events" is not one of the routes given (events.fifo, orders)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := outflow.NewProducer(awstest.DynamoDB(t), tt.cfg)
			require.NoError(t, err)
			_, err = p.TransactItem(outflow.Row{Queue: "order-events", Payload: []byte("x")})
			require.ErrorIs(t, err, outflow.ErrNoRoute)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestNewProducer_RefusesAnOrderedRouteItsRoutesLack(t *testing.T) {
	t.Parallel()
	table := awstest.NewTable(t)
	_, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Routes: "orders=" + pubOrders, Ordered: []string{"events.fifo"}})
	require.ErrorContains(t, err, `ordered route "events.fifo" is not in the routes given (orders)`)
	// Without routes there is nothing to check against: as before.
	_, err = outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
}
