package dynamo_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// requestCounter counts the requests a client makes, by operation, with an
// SDK middleware: every request the code under test sends is seen.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) byOp() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// countingClient is a DynamoDB client for the test endpoint whose requests
// the returned counter counts.
func countingClient(t *testing.T) (*dynamodb.Client, *requestCounter) {
	c := &requestCounter{n: map[string]int{}}
	cfg := awstest.TestConfig(t)
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("count-requests",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.mu.Lock()
				c.n[awsmiddleware.GetOperationName(ctx)]++
				c.mu.Unlock()
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }), c
}

// backlog is a table's rows by state: due (at t0), not yet due (an hour
// after), claimed (due at t0), and dead letters per queue.
type backlog struct {
	due, later, claimed int
	dead                map[string]int
	payload             int // payload bytes of each row
}

// seed writes the backlog's rows as the store encodes them, 25 a request.
func seed(t *testing.T, client *dynamodb.Client, table string, shards int, b backlog) {
	t.Helper()
	var items []map[string]types.AttributeValue
	add := func(row outbox.Row) {
		row.Payload = []byte(strings.Repeat("x", max(b.payload, 1)))
		row.CreatedAt = t0
		if row.Queue == "" && row.Status != outbox.StatusFailed {
			row.Queue = "orders"
		}
		av, err := dynamo.Encode(row, shards)
		require.NoError(t, err)
		items = append(items, av)
	}
	for i := range b.due {
		add(outbox.Row{Key: fmt.Sprintf("due-%05d", i), Status: outbox.StatusPending, DueAt: t0.Add(-time.Duration(i) * time.Millisecond)})
	}
	for i := range b.later {
		add(outbox.Row{Key: fmt.Sprintf("later-%05d", i), Status: outbox.StatusPending, DueAt: t0.Add(time.Hour)})
	}
	for i := range b.claimed {
		add(outbox.Row{Key: fmt.Sprintf("claimed-%05d", i), Status: outbox.StatusClaimed, DueAt: t0, Attempt: 1, Token: "tok", LeaseUntil: t0.Add(time.Minute)})
	}
	for _, q := range slices.Sorted(maps.Keys(b.dead)) {
		for i := range b.dead[q] {
			add(outbox.Row{Key: fmt.Sprintf("dead-%s-%05d", q, i), Queue: q, Status: outbox.StatusFailed, Attempt: 1, FailedAt: t0, LastError: "boom"})
		}
	}
	for chunk := range slices.Chunk(items, 25) {
		req := make([]types.WriteRequest, len(chunk))
		for i, it := range chunk {
			req[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		out, err := client.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: req}})
		require.NoError(t, err)
		require.Empty(t, out.UnprocessedItems)
	}
}

// dead letters of "(none)" are those with no queue name.
var deadQueues = []string{"(none)", "ghost", "orders"}

func TestOperatorCount_MakesTheSameRequestsWhateverTheBacklog(t *testing.T) {
	t.Parallel()
	const shards = 4
	tests := []struct {
		name string
		b    backlog
	}{
		{"ten rows", backlog{due: 4, later: 3, claimed: 1, dead: map[string]int{"orders": 1, "": 1}}},
		{"a thousand rows", backlog{due: 400, later: 300, claimed: 100, dead: map[string]int{"orders": 100, "ghost": 50, "": 50}}},
	}
	requests := map[string]map[string]int{}
	var mu sync.Mutex
	t.Run("sizes", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				client, counter := countingClient(t)
				table := awstest.NewTable(t)
				seed(t, client, table, shards, tt.b)
				op, err := dynamo.NewOperator(client, dynamo.Config{Table: table, Shards: shards})
				require.NoError(t, err)
				before := counter.byOp()

				st, err := op.Count(context.Background(), t0, dynamo.CountQuery{DeadQueues: deadQueues, Cap: dynamo.DefaultCountCap})
				require.NoError(t, err)

				made := counter.byOp()
				for k, v := range before {
					made[k] -= v
					if made[k] == 0 {
						delete(made, k)
					}
				}
				require.Equal(t, map[string]int{"Query": 3*shards + len(deadQueues), "GetItem": 1}, made,
					"3 queries a shard (due, not yet due, oldest), 1 a dead queue, 1 read of the audit item")
				mu.Lock()
				requests[tt.name] = made
				mu.Unlock()

				b := tt.b
				require.Equal(t, dynamo.Counts{Pending: b.due + b.later + b.claimed, Due: b.due + b.claimed, Failed: b.dead["orders"] + b.dead["ghost"] + b.dead[""]}, st.Total)
				require.Equal(t, b.dead["orders"], st.Queues["orders"].Failed)
				require.Equal(t, b.dead["ghost"], st.Queues["ghost"].Failed)
				require.Equal(t, b.dead[""], st.Queues["(none)"].Failed)
				require.Len(t, st.Shards, shards, "every shard listed, empty or not")
				sum := 0
				for _, c := range st.Shards {
					sum += c.Pending
				}
				require.Equal(t, st.Total.Pending, sum)
				require.Equal(t, t0.Add(-time.Duration(b.due-1)*time.Millisecond).UnixMilli(), st.OldestDue.UnixMilli())
				require.False(t, st.Exact)
				require.False(t, st.AtLeast)
				require.Equal(t, dynamo.DeadCountedQueues, st.DeadCounted)
			})
		}
	})
	require.Equal(t, requests["ten rows"], requests["a thousand rows"])
}

func TestOperatorCount_ReportsACappedCountAsALowerBound(t *testing.T) {
	t.Parallel()
	small := backlog{due: 60, later: 2, dead: map[string]int{"orders": 30, "ghost": 3}}
	tests := []struct {
		name       string
		shards     int
		b          backlog
		q          dynamo.CountQuery
		wantQueues map[string]dynamo.Counts
		wantTotal  dynamo.Counts
		// wantCalls is the Query and Scan requests made: one a count,
		// each asking for no more than cap+1 entries.
		wantCalls int
	}{
		{
			name: "named queues", shards: 2, b: small,
			q: dynamo.CountQuery{DeadQueues: []string{"ghost", "orders"}, Cap: 10},
			wantQueues: map[string]dynamo.Counts{
				"orders": {Failed: 10, AtLeast: true},
				"ghost":  {Failed: 3},
			},
			wantTotal: dynamo.Counts{Pending: 22, Due: 20, Failed: 13, AtLeast: true},
			wantCalls: 3*2 + 2,
		},
		{
			name: "a scan of the dead index when no queue is named", shards: 2, b: small,
			q: dynamo.CountQuery{Cap: 10},
			// Which queues the first 10 entries hold depends on the index's
			// order; the total and the mark do not.
			wantTotal: dynamo.Counts{Pending: 22, Due: 20, Failed: 10, AtLeast: true},
			wantCalls: 3*2 + 1,
		},
		{
			// 100 rows of 16 KB are over 1 MB, two pages uncapped: the cap
			// stops the count within the first.
			name: "a shard over 1 MB", shards: 1, b: backlog{due: 100, later: 12, dead: map[string]int{"orders": 100}, payload: 16 << 10},
			q:          dynamo.CountQuery{DeadQueues: []string{"orders"}, Cap: 10},
			wantQueues: map[string]dynamo.Counts{"orders": {Failed: 10, AtLeast: true}},
			wantTotal:  dynamo.Counts{Pending: 20, Due: 10, Failed: 10, AtLeast: true},
			wantCalls:  3 + 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client, counter := countingClient(t)
			table := awstest.NewTable(t)
			seed(t, client, table, tt.shards, tt.b)
			op, err := dynamo.NewOperator(client, dynamo.Config{Table: table, Shards: tt.shards})
			require.NoError(t, err)
			before := counter.byOp()
			st, err := op.Count(context.Background(), t0, tt.q)
			require.NoError(t, err)
			after := counter.byOp()
			require.Equal(t, tt.wantCalls, after["Query"]+after["Scan"]-before["Query"]-before["Scan"])
			require.Equal(t, tt.wantTotal, st.Total)
			require.True(t, st.AtLeast)
			require.Equal(t, 10, st.Cap)
			for shard, c := range st.Shards {
				require.True(t, c.AtLeast, "shard %s holds over 10 due rows", shard)
				require.Equal(t, 10, c.Due)
			}
			if tt.wantQueues != nil {
				got := map[string]dynamo.Counts{}
				for q, c := range st.Queues {
					got[q] = *c
				}
				require.Equal(t, tt.wantQueues, got)
				return
			}
			require.Equal(t, dynamo.DeadCountedScan, st.DeadCounted)
			for q, c := range st.Queues {
				require.True(t, c.AtLeast, "queue %s: a capped scan gives lower bounds", q)
			}
		})
	}
}

func TestOperatorCount_WithoutACapMatchesStats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		shards int
		b      backlog
	}{
		{"small rows", 4, backlog{due: 30, later: 20, claimed: 5, dead: map[string]int{"orders": 7, "ghost": 2, "": 1}}},
		// 150 rows of 16 KB on one shard are over 2 MB: every count pages
		// past DynamoDB's 1 MB a request.
		{"a shard over 1 MB", 1, backlog{due: 150, later: 10, claimed: 3, dead: map[string]int{"orders": 80}, payload: 16 << 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client, counter := countingClient(t)
			table := awstest.NewTable(t)
			seed(t, client, table, tt.shards, tt.b)
			op, err := dynamo.NewOperator(client, dynamo.Config{Table: table, Shards: tt.shards})
			require.NoError(t, err)
			exact, err := op.Stats(context.Background(), t0, nil)
			require.NoError(t, err)
			before := counter.byOp()["Query"]
			for _, q := range []dynamo.CountQuery{{DeadQueues: deadQueues}, {}} {
				st, err := op.Count(context.Background(), t0, q)
				require.NoError(t, err)
				require.Equal(t, dynamo.Counts{
					Pending: exact.Total.Pending + exact.Total.Claimed, Due: exact.Total.Due + exact.Total.Claimed, Failed: exact.Total.Failed,
				}, st.Total)
				for queue, c := range exact.Queues {
					if c.Failed > 0 {
						require.Equal(t, dynamo.Counts{Failed: c.Failed}, *st.Queues[queue], queue)
					}
				}
				for shard, c := range exact.Shards {
					require.Equal(t, c.Due+c.Claimed, st.Shards[shard].Due, shard)
					require.Equal(t, c.Pending+c.Claimed, st.Shards[shard].Pending, shard)
				}
				require.Equal(t, exact.OldestDue, st.OldestDue)
				require.False(t, st.AtLeast)
			}
			if tt.b.payload > 0 {
				// Without paging, the two counts make 3 queries a shard each and
				// one a dead queue.
				require.Greater(t, counter.byOp()["Query"]-before, 6*tt.shards+len(deadQueues), "the counts paged")
			}
		})
	}
}

// ListDead with a limit keeps no more than a bounded number of dead letters
// (twice the limit, at least 1,024) whatever their number, and lists what
// a full read would: the newest, ties in index order. With a queue it
// stops reading at the limit.
func TestOperatorListDead_ALimitBoundsWhatIsHeldAndRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, counter := countingClient(t)
	table := awstest.NewTable(t)
	var items []map[string]types.AttributeValue
	for i := range 1100 {
		// Many ties: 100 failure times for 1,100 rows, of 2 KB so that a
		// queue's 733 are two pages.
		row := outbox.Row{Key: fmt.Sprintf("dead-%05d", i), Queue: "orders", Status: outbox.StatusFailed, Attempt: 1, CreatedAt: t0,
			FailedAt: t0.Add(time.Duration((i*37)%100) * time.Second), LastError: "boom", Payload: []byte(strings.Repeat("x", 2<<10))}
		if i%3 == 0 {
			row.Queue = "ghost"
		}
		av, err := dynamo.Encode(row, 4)
		require.NoError(t, err)
		items = append(items, av)
	}
	for chunk := range slices.Chunk(items, 25) {
		req := make([]types.WriteRequest, len(chunk))
		for i, it := range chunk {
			req[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		_, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: req}})
		require.NoError(t, err)
	}
	op, err := dynamo.NewOperator(client, dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	tests := []struct {
		name string
		q    dynamo.DeadQuery
	}{{"all queues", dynamo.DeadQuery{}}, {"one queue", dynamo.DeadQuery{Queue: "orders"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all, err := op.ListDead(ctx, tt.q, 0)
			require.NoError(t, err)
			require.Greater(t, len(all), 700)
			for _, limit := range []int{1, 50, 300} {
				before := counter.byOp()
				got, err := op.ListDead(ctx, tt.q, limit)
				require.NoError(t, err)
				require.Equal(t, all[:limit], got, "limit %d", limit)
				if tt.q.Queue != "" {
					require.Equal(t, 1, counter.byOp()["Query"]-before["Query"], "limit %d: the first page only", limit)
				}
			}
		})
	}
}
