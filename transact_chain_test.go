package outflow_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
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

// groupChain reads group g of events.fifo back from its tail and returns
// its rows' keys in staging order, checking that each row names the one
// before it, that seqs run 1, 2, … with no gap, and that the group item
// names the last row.
func groupChain(t *testing.T, store *dynamo.Store, group string) []string {
	t.Helper()
	ctx := context.Background()
	tail, err := store.GroupTail(ctx, "events.fifo", group)
	require.NoError(t, err)
	var keys []string
	for key, seq := tail.Key, tail.Seq; key != ""; seq-- {
		row, err := store.Get(ctx, key)
		require.NoError(t, err)
		require.NotNil(t, row, "row %s of group %s exists", key, group)
		require.Equal(t, seq, row.Seq, "row %s of group %s", key, group)
		require.Equal(t, group, row.Group)
		keys = append(keys, key)
		key = row.Prev
	}
	slices.Reverse(keys)
	require.Len(t, keys, int(tail.Seq), "the chain of group %s reaches seq 1 from its tail with no gap", group)
	return keys
}

// ev is a row of the ordered route events.fifo.
func ev(key, group string) outflow.Row {
	return outflow.Row{Key: key, Queue: "events.fifo", Group: group, Payload: []byte(key)}
}

func TestTransact_ChainsSeveralRowsOfAGroupInTheOrderGiven(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// groups gives each row's group, in the order given; "" is a row
		// of the unordered route.
		groups []string
	}{
		{"three rows of one group", []string{"g", "g", "g"}},
		{"two groups interleaved with unordered rows", []string{"g", "h", "", "g", "h", "g", ""}},
		{"three groups", []string{"a", "b", "c", "c", "b", "a", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newTxHarness(t)
			h.seedOrder(t, "order-1", "1")
			want := map[string][]string{}
			var groups []string
			rowsOf := func(round int) []outflow.Row {
				rows := make([]outflow.Row, len(tt.groups))
				for i, g := range tt.groups {
					key := fmt.Sprintf("r%d-%d-%s", round, i, g)
					if g == "" {
						rows[i] = outflow.Row{Key: key + "u", Queue: "orders", Payload: []byte(key)}
						continue
					}
					if _, ok := want[g]; !ok {
						groups = append(groups, g)
					}
					rows[i] = ev(key, g)
					want[g] = append(want[g], key)
				}
				return rows
			}

			// The first round through TransactItems: items[i] is row i's
			// put, then one update per group in the order groups appear.
			rows := rowsOf(1)
			items, err := h.p.TransactItems(ctx, rows...)
			require.NoError(t, err)
			require.Len(t, items, len(rows)+len(groups), "a put per row and one update per group")
			for i, r := range rows {
				require.NotNil(t, items[i].Put, "item %d is row %d's put", i, i)
				require.Equal(t, &types.AttributeValueMemberS{Value: r.Key}, items[i].Put.Item[dynamo.AttrKey])
			}
			for k, g := range groups {
				update := items[len(rows)+k].Update
				require.NotNil(t, update, "then the groups' updates")
				require.Equal(t, strKey(dynamo.GroupKey("events.fifo", g)), update.Key)
			}
			_, err = h.client.TransactWriteItems(ctx, txOf(items...))
			require.NoError(t, err)

			// The second round through Transact, with a business write:
			// each group's chain goes on from the first round's tail.
			rows = rowsOf(2)
			keys, err := h.p.Transact(ctx, txOf(h.placeOrder("order-1")), rows...)
			require.NoError(t, err)
			for i, r := range rows {
				require.Equal(t, r.Key, keys[i])
			}
			require.Equal(t, "2", h.version(t, "order-1"))

			for _, g := range groups {
				require.Equal(t, want[g], groupChain(t, h.store, g), "group %s: both rounds, each in the order given", g)
			}
			for i, g := range tt.groups {
				if g == "" {
					require.Equal(t, []int64{0, 0}, seqs(t, h.store, fmt.Sprintf("r1-%d-u", i), fmt.Sprintf("r2-%d-u", i)), "unordered rows are in no chain")
				}
			}
		})
	}
}

// Producers that stage chains into one group with Transact race one
// another and producers that Put single rows into it: DynamoDB serialises
// them on the group item, the losers send again, and the group ends as
// one chain in which each transaction's rows sit together, in order.
func TestTransact_ChainsStayWholeWhileOtherProducersStageIntoTheGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	const transactors, putters, each = 4, 2, 4
	var (
		mu       sync.Mutex
		txns     [][]string // each committed transaction's keys of group g, in order
		puts     [][]string // each putter's keys, in order
		retries  atomic.Int64
		failures = make(chan error, transactors+putters)
		wg       sync.WaitGroup
	)
	for p := range transactors {
		wg.Go(func() {
			for n := range each {
				// One to three rows of g, and now and then a row of
				// another group or route beside them.
				var rows []outflow.Row
				var keys []string
				for i := range 1 + (p+n)%3 {
					key := fmt.Sprintf("t%d-%d-%d", p, n, i)
					rows = append(rows, ev(key, "g"))
					keys = append(keys, key)
				}
				if n%2 == 1 {
					rows = append(rows, ev(fmt.Sprintf("t%d-%d-other", p, n), fmt.Sprintf("other-%d", p)))
					rows = append(rows, outflow.Row{Key: fmt.Sprintf("t%d-%d-u", p, n), Queue: "orders", Payload: []byte("u")})
				}
				if err := transactUntilCommitted(ctx, h.p, rows, &retries); err != nil {
					failures <- fmt.Errorf("transactor %d, transaction %d: %w", p, n, err)
					return
				}
				mu.Lock()
				txns = append(txns, keys)
				mu.Unlock()
			}
		})
	}
	for p := range putters {
		wg.Go(func() {
			var keys []string
			for n := range each {
				key := fmt.Sprintf("p%d-%d", p, n)
				if _, err := h.p.Put(ctx, ev(key, "g")); err != nil {
					failures <- fmt.Errorf("putter %d, row %d: %w", p, n, err)
					return
				}
				keys = append(keys, key)
			}
			mu.Lock()
			puts = append(puts, keys)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		require.NoError(t, err)
	}
	t.Logf("%d transactions sent again after a lost race", retries.Load())

	chain := groupChain(t, h.store, "g")
	var staged []string
	for _, keys := range append(slices.Clone(txns), puts...) {
		staged = append(staged, keys...)
	}
	require.ElementsMatch(t, staged, chain, "every row staged is in the chain once, and nothing else is")

	// Every row is named as a predecessor by at most one row: no fork.
	named := map[string]int{}
	for _, key := range chain {
		row, err := h.store.Get(ctx, key)
		require.NoError(t, err)
		named[row.Prev]++
	}
	for prev, n := range named {
		require.Equal(t, 1, n, "row %q is named as predecessor %d times", prev, n)
	}

	place := map[string]int{}
	for i, key := range chain {
		place[key] = i
	}
	for _, keys := range txns {
		for i := 1; i < len(keys); i++ {
			require.Equal(t, place[keys[i-1]]+1, place[keys[i]], "a transaction's rows %v sit together in the order given: %v", keys, chain)
		}
	}
	for _, keys := range puts {
		for i := 1; i < len(keys); i++ {
			require.Less(t, place[keys[i-1]], place[keys[i]], "a putter's rows in its order: %v", chain)
		}
	}
	for p := range transactors {
		require.Equal(t, []string{fmt.Sprintf("t%d-1-other", p), fmt.Sprintf("t%d-3-other", p)}, groupChain(t, h.store, fmt.Sprintf("other-%d", p)),
			"another group staged beside g in the same transactions")
	}
}

// transactUntilCommitted sends rows with Transact until they commit,
// again after each lost race, as a caller does with Retryable.
func transactUntilCommitted(ctx context.Context, p *outflow.Producer, rows []outflow.Row, retries *atomic.Int64) error {
	for try := range 200 {
		_, err := p.Transact(ctx, nil, rows...)
		var txErr *outflow.TransactError
		if !errors.As(err, &txErr) || !txErr.Retryable() {
			return err
		}
		retries.Add(1)
		time.Sleep(time.Duration(1+rand.IntN(5<<min(try, 4))) * time.Millisecond)
	}
	return errors.New("still losing the race after 200 tries")
}

func TestTransact_SendingTheSameChainAgainStagesNothingNew(t *testing.T) {
	t.Parallel()
	rows := func(last string) []outflow.Row {
		r := []outflow.Row{ev("created", "order-7"), {Key: "audit", Queue: "orders", Payload: []byte("a")}, ev("lines-added", "order-7"), ev("paid", "order-8"), ev("shipped", "order-7")}
		r[4].Payload = []byte(last)
		return r
	}
	tests := []struct {
		name string
		// first stages the rows the first time; a lost response is an
		// error of no cancellation, after the commit.
		lost  bool
		again []outflow.Row
		// want is each row's reason, by index in the items sent.
		want map[int]error
	}{
		{
			name:  "the same rows again",
			again: rows("shipped"),
			want:  map[int]error{0: outflow.ErrAlreadyStaged, 1: outflow.ErrAlreadyStaged, 2: outflow.ErrAlreadyStaged, 3: outflow.ErrAlreadyStaged, 4: outflow.ErrAlreadyStaged},
		},
		{
			name:  "the same rows again after a lost response",
			lost:  true,
			again: rows("shipped"),
			want:  map[int]error{0: outflow.ErrAlreadyStaged, 1: outflow.ErrAlreadyStaged, 2: outflow.ErrAlreadyStaged, 3: outflow.ErrAlreadyStaged, 4: outflow.ErrAlreadyStaged},
		},
		{
			name:  "the last row of a chain changed",
			again: rows("shipped twice"),
			want:  map[int]error{0: outflow.ErrAlreadyStaged, 1: outflow.ErrAlreadyStaged, 2: outflow.ErrAlreadyStaged, 3: outflow.ErrAlreadyStaged, 4: outflow.ErrKeyConflict},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newTxHarness(t)
			api := &lostResponseAPI{API: h.client}
			api.lost.Store(!tt.lost)
			p, err := outflow.NewProducer(api, outflow.Config{Table: h.table, Ordered: []string{"events.fifo"}})
			require.NoError(t, err)

			keys, err := p.Transact(ctx, nil, rows("shipped")...)
			if tt.lost {
				require.Error(t, err)
				require.NotErrorIs(t, err, outflow.ErrAlreadyStaged)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, []string{"created", "audit", "lines-added", "paid", "shipped"}, keys)

			_, err = p.Transact(ctx, nil, tt.again...)
			var txErr *outflow.TransactError
			require.ErrorAs(t, err, &txErr)
			require.False(t, txErr.Retryable(), "sending again fails the same way")
			got := map[int]error{}
			for _, it := range txErr.Items {
				require.NotEmpty(t, it.Row, "only the rows' puts failed, not the groups' updates: %v", err)
				got[it.Index] = it.Reason
			}
			require.Equal(t, tt.want, got, "%v", err)

			require.Equal(t, []string{"created", "lines-added", "shipped"}, groupChain(t, h.store, "order-7"), "the chain is as the first send left it")
			require.Equal(t, []string{"paid"}, groupChain(t, h.store, "order-8"))
			require.Equal(t, []byte("shipped"), h.payload(t, "shipped"))
		})
	}
}

func TestTransact_RefusesMoreItemsThanOneTransactionHoldsBeforeReadingAnything(t *testing.T) {
	t.Parallel()
	many := func(n int, row func(i int) outflow.Row) []outflow.Row {
		rows := make([]outflow.Row, n)
		for i := range rows {
			rows[i] = row(i)
		}
		return rows
	}
	oneGroup := func(i int) outflow.Row { return ev(fmt.Sprintf("g-%03d", i), "g") }
	ownGroups := func(i int) outflow.Row { return ev(fmt.Sprintf("own-%03d", i), fmt.Sprintf("g%d", i)) }
	unordered := func(i int) outflow.Row {
		return outflow.Row{Key: fmt.Sprintf("u-%03d", i), Queue: "orders", Payload: []byte("u")}
	}
	tests := []struct {
		name   string
		own    int
		rows   []outflow.Row
		detail string // "" when it fits and commits
	}{
		{"99 rows of one group and its update fit", 0, many(99, oneGroup), ""},
		{"100 rows of one group and its update do not", 0, many(100, oneGroup), "100 rows in 1 ordered groups need 101 items"},
		{"98 unordered rows and two writes of yours fit", 2, many(98, unordered), ""},
		{"99 unordered rows and two writes of yours do not", 2, many(99, unordered), "need 101 items with the 2 of yours"},
		{"50 rows in 50 groups fit", 0, many(50, ownGroups), ""},
		{"50 rows in 50 groups and a write of yours do not", 1, many(50, ownGroups), "50 rows in 50 ordered groups need 101 items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newTxHarness(t)
			var own []types.TransactWriteItem
			for i := range tt.own {
				pk := fmt.Sprintf("order-%d", i)
				h.seedOrder(t, pk, "1")
				own = append(own, h.placeOrder(pk))
			}
			var gets atomic.Int64
			api := &faultyTxAPI{API: h.client, get: func(ctx context.Context, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				gets.Add(1)
				return h.client.GetItem(ctx, in)
			}}
			p, err := outflow.NewProducer(api, outflow.Config{Table: h.table, Ordered: []string{"events.fifo"}})
			require.NoError(t, err)

			_, err = p.Transact(ctx, txOf(own...), tt.rows...)
			if tt.detail == "" {
				require.NoError(t, err)
				require.Len(t, api.sent[0].TransactItems, outflow.MaxTransactItems)
				if tt.rows[0].Group == "g" {
					require.Len(t, groupChain(t, h.store, "g"), len(tt.rows))
				}
				return
			}
			require.ErrorIs(t, err, outflow.ErrTooManyItems)
			require.ErrorContains(t, err, tt.detail)
			require.ErrorContains(t, err, "at most 100")
			require.Empty(t, api.sent, "nothing sent")
			require.Zero(t, gets.Load(), "no tail read")

			// TransactItems counts the rows' items alone: in these cases
			// it is your writes that tip them over, when there are any.
			_, err = p.TransactItems(ctx, tt.rows...)
			if tt.own > 0 {
				require.NoError(t, err, "without your writes they fit")
			} else {
				require.ErrorIs(t, err, outflow.ErrTooManyItems)
			}
		})
	}
}

// A chain staged in one transaction reaches its FIFO queue in the order
// given, after the group's earlier rows, beside another group's chain.
func TestTransact_AChainStagedInOneTransactionIsDeliveredInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
	queue := awstest.NewQueue(t, true)
	sender, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": queue}, 0)
	require.NoError(t, err)
	e, err := outbox.New(h.store, sender, policy)
	require.NoError(t, err)

	_, err = h.p.Put(ctx, ev("order-7-opened", "order-7"))
	require.NoError(t, err)
	_, err = h.p.Transact(ctx, nil,
		ev("order-7-created", "order-7"), ev("order-8-created", "order-8"), ev("order-7-lines-added", "order-7"),
		ev("order-8-lines-added", "order-8"), ev("order-7-priced", "order-7"))
	require.NoError(t, err)
	_, err = h.p.Transact(ctx, nil, ev("order-7-paid", "order-7"), ev("order-7-shipped", "order-7"))
	require.NoError(t, err)

	delivered := 0
	for range 10 {
		res, err := e.Sweep(ctx)
		require.NoError(t, err)
		if delivered += res.Delivered; delivered == 8 {
			break
		}
	}
	require.Equal(t, 8, delivered)

	got := map[string][]string{}
	for _, m := range awstest.Receive(t, queue, 8, 10*time.Second) {
		group := m.Attributes["MessageGroupId"]
		got[group] = append(got[group], aws.ToString(m.Body))
	}
	require.Equal(t, map[string][]string{
		"order-7": {"order-7-opened", "order-7-created", "order-7-lines-added", "order-7-priced", "order-7-paid", "order-7-shipped"},
		"order-8": {"order-8-created", "order-8-lines-added"},
	}, got)
}

// A chain whose transaction committed but whose answer was lost, sent
// again after the dispatcher delivered it, finds its keys free and is
// staged anew after its own last row. Each row is linked to its
// predecessor by key and place, so the new rows wait only for one another
// and the group goes on: the old rows are delivered and gone.
func TestTransact_AChainSentAgainAfterItWasDeliveredDoesNotStickItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newTxHarness(t)
	api := &lostResponseAPI{API: h.client}
	p, err := outflow.NewProducer(api, outflow.Config{Table: h.table, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
	sender, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": awstest.NewQueue(t, true)}, 0)
	require.NoError(t, err)
	e, err := outbox.New(h.store, sender, policy)
	require.NoError(t, err)
	sweep := func(want int) {
		t.Helper()
		delivered := 0
		for range 10 {
			res, err := e.Sweep(ctx)
			require.NoError(t, err)
			if delivered += res.Delivered; delivered >= want {
				break
			}
		}
		require.Equal(t, want, delivered)
	}

	chain := []outflow.Row{ev("order-7-created", "order-7"), ev("order-7-lines-added", "order-7")}
	_, err = p.Transact(ctx, nil, chain...)
	require.Error(t, err, "the answer was lost")
	sweep(2)

	_, err = p.Transact(ctx, nil, chain...)
	require.NoError(t, err, "the keys are free again")
	_, err = p.Transact(ctx, nil, ev("order-7-paid", "order-7"))
	require.NoError(t, err)
	sweep(3)
	for _, key := range []string{"order-7-created", "order-7-lines-added", "order-7-paid"} {
		row, err := h.store.Get(ctx, key)
		require.NoError(t, err)
		require.Nil(t, row, "%s was delivered", key)
	}
}
