package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/moto"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Routes: a standard queue, a FIFO queue whose groups are ordered and
// skip their dead heads, and one whose groups block behind them until an
// operator purges them.
const (
	routeTransfers = "transfers"
	routeOrdered   = "ordered.fifo"
	routeBlock     = "held.fifo"
	// maxMessage is the dispatcher's message limit here, below the
	// producer's (SQS's): a transfer padded past it is staged, then
	// dead-lettered as too large, so groups of the skip route have gaps.
	maxMessage = 2048
)

// transfer is one staged row: money moved out of an account by the
// producer, to be moved into the account's ledger by the consumer.
type transfer struct {
	key, account, route, group string
	amount                     int64
	place                      int64 // in its ordered group, from 1
	tooLarge                   bool
	// refusedOnce is refused for good until the operator redrives it: a
	// dead letter that then goes through.
	refusedOnce bool
	// fair is the group id a standard queue hands the consumer with the
	// transfer (a fair queue's): it means no order.
	fair string
}

// clock is the engines' clock: the wall clock, moved on by the soak's
// rounds and stalls. It is never behind the wall clock, so a row the
// producer stages (at the wall clock's time) is due at once.
type clock struct{ ahead atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) Advance(d time.Duration) { c.ahead.Add(int64(d)) }

// TestSoak_EveryTransferIsAppliedOnceAndInOrder is the end-to-end soak.
// A producer moves money: each transfer updates an account and stages
// its outbox row in one TransactWriteItems. Outflow delivers under the
// soak's faults (failed, refused and ambiguous sends, failed and
// ambiguous settles, throttles, stalls past the lease, crashed sweeps),
// three sweepers at once. The queues redeliver: a one-second visibility
// timeout and deletes that fail. The consumer, package consume's Poller
// and Inbox, applies each transfer to a ledger in one transaction with
// its inbox items, and is killed before effects and between effects and
// deletes. At the end, for every account, the ledger holds exactly the
// transfers delivered, each once, and the producer's total less the
// dead letters the consumer never saw; every ordered group's log is its
// staging order with gaps only at dead letters, which the consumer passed
// as gaps, and a late copy is told from a gap.
// The operator and the retrying producer take part: dead heads of the
// route that blocks are purged every round (their places closed by
// Outflow's message), dead letters of the route that skips are redriven
// in rounds 10 and 14 (recorded late by the consumer when their group
// went past them), after which its dead letters whose closing message
// failed (holding their groups) are purged, and the producer reruns transactions of delivered
// transfers (refused as staged). A third of the standard queue's
// transfers reach the consumer with a group id, as a fair queue's do.
//
// OUTFLOW_E2E_ROWS sets the size (300 in make test; make soak-e2e runs
// 20,000), OUTFLOW_E2E_SEED the seed, OUTFLOW_E2E_REPORT a file for the
// report.
func TestSoak_EveryTransferIsAppliedOnceAndInOrder(t *testing.T) {
	t.Parallel()
	rows := awstest.EnvInt("OUTFLOW_E2E_ROWS", 300)
	seed := uint64(awstest.EnvInt("OUTFLOW_E2E_SEED", int(time.Now().UnixNano()%1_000_000_007)))
	t.Logf("end-to-end soak: %d rows, seed %d", rows, seed)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: OUTFLOW_E2E_SEED=%d OUTFLOW_E2E_ROWS=%d go test -count=1 -run '^TestSoak_EveryTransferIsAppliedOnceAndInOrder$' ./internal/e2e", seed, seed, rows)
		}
	}()
	start := time.Now()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	db := awstest.DynamoDB(t)
	sqsClient := awstest.SQS(t)
	if os.Getenv(awstest.EndpointEnv) == "" {
		// The queues get a moto server of their own: one server's
		// Python process, on one core, is what bounds the soak's pace.
		srv, err := moto.Start(ctx)
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		cfg, err := awstest.Config(ctx, srv.URL)
		require.NoError(t, err)
		sqsClient = sqs.NewFromConfig(cfg)
	}
	outboxTable := awstest.NewTable(t)
	bank, ledgerTable := newTable(t, db, "bank"), newTable(t, db, "ledger")
	const shards = 4
	// Delivered rows are kept as done, as the dispatcher's default is: a
	// producer's retry of a delivered transfer finds it staged.
	store, err := dynamo.New(db, dynamo.Config{Table: outboxTable, Shards: shards, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	producer, err := outflow.NewProducer(db, outflow.Config{Table: outboxTable, Shards: shards, Ordered: []string{routeOrdered, routeBlock}})
	require.NoError(t, err)
	routes := delivery.Routes{routeTransfers: awstest.NewQueueOn(t, sqsClient, false), routeOrdered: awstest.NewQueueOn(t, sqsClient, true),
		routeBlock: awstest.NewQueueOn(t, sqsClient, true)}
	op, err := dynamo.NewOperator(db, dynamo.Config{Table: outboxTable, Shards: shards})
	require.NoError(t, err)

	// What to stage: transfers from a few accounts, a third of them in
	// ordered groups (two hot, many small), a quarter of those on the
	// route that blocks; a few padded past the dispatcher's limit, at
	// least one in each of the first groups of each route; a few refused
	// once, at least one in the first group of the route that skips. Of
	// the unordered transfers, a third reach the consumer with a group id
	// (a fair queue's), which means no order there.
	accounts := max(5, rows/400)
	smallGroups := max(2, rows/40)
	all := make([]transfer, rows)
	byKey := make(map[string]transfer, rows)
	groups := map[string][]string{} // each group's keys in staging order
	refusedOnce := map[string]bool{}
	for i := range all {
		tr := transfer{key: fmt.Sprintf("e2e-%06d", i), account: fmt.Sprintf("acct-%03d", rng.IntN(accounts)), route: routeTransfers, amount: 1 + rng.Int64N(999)}
		switch {
		case rng.Float64() < 0.35:
			tr.route, tr.group = routeOrdered, "small-"+strconv.Itoa(rng.IntN(smallGroups))
			if rng.Float64() < 0.4 {
				tr.group = "hot-" + strconv.Itoa(rng.IntN(2))
			}
			if rng.Float64() < 0.25 {
				tr.route, tr.group = routeBlock, "held-"+strconv.Itoa(rng.IntN(max(2, smallGroups/4)))
			}
			groups[tr.group] = append(groups[tr.group], tr.key)
			tr.place = int64(len(groups[tr.group]))
			tr.tooLarge = rng.Float64() < 0.03 || (tr.place == 2 && (tr.group == "hot-0" || tr.group == "held-0"))
			tr.refusedOnce = tr.route == routeOrdered && !tr.tooLarge && (rng.Float64() < 0.02 || (tr.place%5 == 3 && tr.group == "hot-1"))
		case rng.Float64() < 0.33:
			tr.fair = "fair-" + strconv.Itoa(rng.IntN(4))
			tr.tooLarge = rng.Float64() < 0.005
		default:
			tr.tooLarge = rng.Float64() < 0.005
		}
		if tr.refusedOnce {
			refusedOnce[tr.key] = true
		}
		all[i], byKey[tr.key] = tr, tr
	}

	// Outflow, under faults.
	plan := faults.NewPlan(seed, map[faults.Kind]float64{
		faults.SendCall: 0.02, faults.SendEntry: 0.03, faults.SendSender: 0.005, faults.SendAmbiguous: 0.01,
		faults.SettleBefore: 0.02, faults.SettleAfter: 0.01, faults.Throttle: 0.01, faults.Delay: 0.01,
		faults.ClaimAmbiguous: 0.01, faults.Crash: 0.1,
		faults.StallClaimed: 0.003, faults.StallSend: 0.003, faults.StallSettle: 0.003,
	})
	clk := &clock{}
	wire := &wireLog{next: sqsClient, clock: clk.Now, start: start}
	router, err := delivery.New(delivery.Clients{SQS: faults.SQS{Next: wire, Plan: plan}}, routes, maxMessage)
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.Ordered = map[string]outbox.DeadHead{routeOrdered: outbox.DeadHeadSkip, routeBlock: outbox.DeadHeadBlock}
	policy.MaxAttempts = 6
	policy.BackoffBase, policy.BackoffMax = time.Second, 8*time.Second
	// The lease is a minute of the clock, which runs at least as fast as
	// the wall clock: a loaded machine does not lapse claims by itself;
	// the stalls do.
	policy.Lease = time.Minute
	policy.WakeGrace = 0
	policy.PageSize = 250
	policy.Concurrency = 8
	policy.RowBudget = max(400, rows/20)
	policy.BatchLinger = 5 * time.Millisecond
	stalls := &faults.Stalls{Plan: plan, Advance: clk.Advance, Jump: policy.Lease + time.Second}
	// Each send of a refusedOnce row is refused for good (not a message
	// closing its place) until fixed: SQS refusing the message, say, for
	// a setting the operator then fixes before redriving the rows.
	var fixed atomic.Bool
	var refused atomic.Int64
	sender := faults.Refuse{Next: stalls.Deliverer(router), Fail: func(row outbox.Row) error {
		if !refusedOnce[row.Key] || row.Closed != "" || fixed.Load() {
			return nil
		}
		refused.Add(1)
		return outbox.Permanent(errors.New("refused for good (injected)"))
	}}

	// The consumer, under its own faults, one poller per queue at a time
	// in each of two processes, each restarted when killed.
	cplan := faults.NewPlan(seed^0x5bd1e995, map[faults.Kind]float64{killBeforeEffect: 0.02, killAfterEffect: 0.02, deleteFails: 0.05})
	stats := &consumerStats{}
	led := &ledger{db: db, table: ledgerTable, plan: cplan, stats: stats, want: byKey, attempts: map[string]int{}, appliedAt: map[string]time.Duration{}, start: start,
		closed: map[string][]int64{}, redriven: map[string]bool{}, late: map[string]bool{}}
	inboxes := map[string]*consume.Inbox{}
	for route := range routes {
		in, err := consume.NewInbox(db, consume.InboxConfig{Table: ledgerTable, Consumer: "ledger-" + strings.TrimSuffix(route, ".fifo"), TTL: 24 * time.Hour})
		require.NoError(t, err)
		inboxes[route] = in
	}
	stopConsumers := make(chan struct{})
	var consumers sync.WaitGroup
	for route, url := range routes {
		for range 2 {
			consumers.Go(func() {
				for {
					select {
					case <-stopConsumers:
						return
					default:
					}
					pctx, cancel := context.WithCancel(ctx)
					proc := &process{next: sqsClient, plan: cplan, stop: cancel, stats: stats}
					if route == routeTransfers {
						proc.fair = func(key string) string { return byKey[key].fair }
					}
					stats.lives.Add(1)
					p := &consume.Poller{API: proc, QueueURL: url, Concurrency: 4, Visibility: time.Second, Wait: time.Second,
						Apply:  func(ctx context.Context, m consume.Message) error { return led.apply(ctx, proc, inboxes[route], m) },
						Closed: func(ctx context.Context, m consume.Message) error { return led.close(ctx, proc, inboxes[route], m) }}
					stopped := make(chan struct{})
					go func() {
						select {
						case <-stopConsumers:
						case <-stopped:
						}
						cancel()
					}()
					_ = p.Run(pctx) // returns nil once pctx ends
					close(stopped)
				}
			})
		}
	}
	defer func() { // on a failure too, before the queues go
		select {
		case <-stopConsumers:
		default:
			close(stopConsumers)
		}
		consumers.Wait()
	}()

	// Run: the producer stages a quarter of the transfers in each of the
	// first four rounds, while three sweepers (two partitions of a
	// backstop of two, and one whole sweep racing both; some crash) run;
	// the clock moves a second per round.
	var sweeps, crashes, staged, purges, purgesOpen, purgesHeld, redrives atomic.Int64
	// The redrives of the route that skips are in rounds 10 and 14; after
	// them, its open places are purged (runRound).
	const lastRedrive = 14
	purgedOpen := map[string]bool{}
	stageWave := func(wave []transfer) error {
		// Four producers; a group's transfers stay with one, in order.
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i, tr := range wave {
					mine := i%4 == w
					if tr.group != "" {
						h := fnv.New32a()
						_, _ = h.Write([]byte(tr.group))
						mine = int(h.Sum32()%4) == w
					}
					if !mine {
						continue
					}
					if errs[w] = stage(ctx, db, producer, bank, tr); errs[w] != nil {
						return
					}
					staged.Add(1)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	sweepers := []outbox.Partition{{Index: 0, Count: 2}, {Index: 1, Count: 2}, outbox.Whole}
	runRound := func(round int, wave []transfer) {
		var works []func()
		for w, part := range sweepers {
			sctx, cancel := context.WithCancel(ctx)
			cs := &faults.Crasher{Store: stalls.Store(faults.Store{Store: store, Plan: plan}), Crash: cancel}
			e, err := outbox.New(cs, sender, policy, outbox.WithClock(clk.Now))
			require.NoError(t, err)
			if plan.Hit(faults.Crash, round, w) {
				crashes.Add(1)
				cs.CrashAfter = 1 + int((seed+uint64(round*3+w))%40)
			}
			works = append(works, func() {
				defer cancel()
				_, _ = e.SweepPartition(sctx, part)
				sweeps.Add(1)
			})
		}
		var stageErr error
		var wg sync.WaitGroup
		if len(wave) > 0 {
			wg.Go(func() { stageErr = stageWave(wave) })
		}
		for _, work := range works {
			wg.Go(work)
		}
		wg.Wait()
		require.NoError(t, stageErr, "the producer's transactions")
		// The operator purges the dead heads holding groups of the route
		// that blocks, each round: each place is closed by its message, and
		// the group goes on. One whose send may still land is held, and
		// purged in a later round.
		now := clk.Now()
		res, err := operate.Purge(ctx, op, nil, operate.Selection{Queue: routeBlock}, now, operate.Hold{Now: now, Wait: policy.UnsureWait()}, nil)
		require.NoError(t, err, "the operator's purge")
		purges.Add(int64(res.Done))
		purgesHeld.Add(int64(res.Held))
		// On the route that skips, a dead letter whose closing message
		// could not be sent (closed "unsent") holds its group, as the
		// BlockedGroupAlarm says; once the redrives are over, the operator
		// purges it, which sends its closing message again. (Named by key:
		// with no keys, a purge takes its selection.)
		var open []string
		if round > lastRedrive {
			open = openPlaces(ctx, t, op, routeOrdered)
		}
		if len(open) > 0 {
			res, err := operate.Purge(ctx, op, open, operate.Selection{}, now, operate.Hold{Now: now, Wait: policy.UnsureWait()}, nil)
			require.NoError(t, err, "the operator's purge of open places")
			for _, k := range open {
				purgedOpen[k] = true
			}
			purgesOpen.Add(int64(res.Done))
			purgesHeld.Add(int64(res.Held))
		}
		clk.Advance(time.Second)
		if rows >= 5000 {
			t.Logf("round %d done after %s: %d staged, %d sweeps (%d crashed), %d effects committed", round, time.Since(start).Round(time.Second), staged.Load(), sweeps.Load(), crashes.Load(), stats.committed.Load())
		}
	}
	// The producer's retries: in rounds 6 to 9, after most of the
	// transfers were delivered, the producer runs the transaction of one
	// transfer in 50 again, as after a lost answer. Each is refused as
	// staged already (its row kept as done, or still pending, or dead),
	// and the account is not moved twice: no key takes a second place.
	var retried, retriedRefused atomic.Int64
	retryWave := func(round int) error {
		var errs []error
		for i, tr := range all {
			if (i+round)%200 != 0 {
				continue
			}
			retried.Add(1)
			err := stage(ctx, db, producer, bank, tr)
			switch {
			case errors.Is(err, outflow.ErrAlreadyStaged):
				retriedRefused.Add(1)
			case err == nil:
				errs = append(errs, fmt.Errorf("%s was staged again", tr.key))
			default:
				errs = append(errs, fmt.Errorf("retry of %s: %w", tr.key, err))
			}
		}
		return errors.Join(errs...)
	}
	round := 0
	for ; round < 20; round++ {
		var wave []transfer
		if round < 4 {
			wave = all[round*rows/4 : (round+1)*rows/4]
		}
		runRound(round, wave)
		if round >= 6 && round < 10 {
			require.NoError(t, retryWave(round), "a producer's retry of a staged transfer")
		}
		if round == 10 || round == lastRedrive {
			// The operator redrives the dead letters of the route that
			// skips: their places were passed, or closed, so each arrives
			// late and is recorded, not applied; or it dies again.
			fixed.Store(true)
			refs, err := op.ListDead(ctx, dynamo.DeadQuery{Queue: routeOrdered}, 0)
			require.NoError(t, err)
			var keys []string
			led.mu.Lock()
			for _, d := range refs {
				keys = append(keys, d.Key)
				led.redriven[d.Key] = true
			}
			led.mu.Unlock()
			res, err := operate.Redrive(ctx, op, keys, operate.Selection{}, clk.Now(), nil)
			require.NoError(t, err, "the operator's redrive")
			redrives.Add(int64(res.Done))
		}
	}
	// Drain: Outflow's faults off; leases, backoffs and the wait behind an
	// unsure dead head run out on the clock, a whole UnsureWait a round
	// (longer than the lease): at 10 s a round, a group held by a crashed
	// sweep's claim waited six rounds for its lease (docs/reliability.md).
	plan.Stop()
	var due []string
	for range 60 {
		clk.Advance(policy.UnsureWait())
		runRound(round, nil)
		round++
		if due = awstest.DueKeys(t, store, clk.Now().Add(time.Hour)); len(due) == 0 {
			break
		}
	}
	require.Empty(t, due, "no row is left due once Outflow's faults stop")

	// Outflow's outcome: each row done (kept as done) or dead; or purged:
	// its place closed by its message (kept as done, closed "purged"), or
	// deleted (its closing message had failed for good).
	dead := map[string]outbox.Row{}
	purged := map[string]*outbox.Row{}
	for _, tr := range all {
		row, err := store.Get(ctx, tr.key)
		require.NoError(t, err)
		if row == nil {
			require.True(t, tr.route == routeBlock || purgedOpen[tr.key], "%s is gone, but only purges delete rows", tr.key)
			purged[tr.key] = nil
			continue
		}
		if row.Closed == outbox.ClosedPurged {
			require.True(t, awstest.SettledDone(row), "%s was purged, and its place's message sent: %+v", tr.key, row)
			purged[tr.key] = row
			continue
		}
		if awstest.SettledDone(row) {
			continue
		}
		require.Equal(t, outbox.StatusFailed, row.Status, "%s ended %s", tr.key, row.Status)
		dead[tr.key] = *row
	}
	listed, err := op.ListDead(ctx, dynamo.DeadQuery{}, 0)
	require.NoError(t, err)
	var listedKeys []string
	for _, d := range listed {
		listedKeys = append(listedKeys, d.Key)
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(dead)), listedKeys, "the dead letters the operator lists are the rows left failed")

	// The consumer: wait until every row Outflow delivered is applied,
	// while it makes progress (kills and lapsing visibility timeouts
	// only slow it).
	applied := func() map[string]bool {
		got := map[string]bool{}
		for _, it := range scan(t, db, ledgerTable, "ledger ") {
			for _, k := range it["keys"].(*types.AttributeValueMemberSS).Value {
				got[k] = true
			}
		}
		return got
	}
	var missing []string
	last, lastChange := -1, time.Now()
	for {
		got := applied()
		missing = missing[:0]
		late := led.lateKeys()
		for _, tr := range all {
			_, isDead := dead[tr.key]
			_, isPurged := purged[tr.key]
			if !isDead && !isPurged && !late[tr.key] && !got[tr.key] {
				missing = append(missing, tr.key)
			}
		}
		led.mu.Lock()
		wrong := len(led.passed) + len(led.problems)
		led.mu.Unlock()
		if len(missing) == 0 || wrong > 0 {
			break // done, or a message the consumer must refuse for ever
		}
		if len(got) != last {
			last, lastChange = len(got), time.Now()
		}
		if time.Since(lastChange) > 2*time.Minute {
			break // no effect in two minutes: the rest is lost
		}
		time.Sleep(500 * time.Millisecond)
	}
	close(stopConsumers)
	consumers.Wait()
	led.mu.Lock()
	gaps, passed, problems := slices.Clone(led.gaps), slices.Clone(led.passed), slices.Clone(led.problems)
	led.mu.Unlock()
	require.Empty(t, problems, "what the consumer received matches what was staged")
	if len(passed) > 0 {
		t.Log(diagnose(ctx, t, store, wire, led, groups, byKey, start))
	}
	// First, as a copy refused for ever holds its group back, and the
	// ledger then misses the group's later rows.
	slices.Sort(passed)
	require.Empty(t, slices.Compact(passed), "no copy arrived behind its group (a reordering, or a copy applied already that the inbox let through)")

	// Invariants. The ledger, account by account.
	got := applied()
	var arrivedDead, deadAmount, appliedAmount int64
	deadNotApplied := map[string]bool{}
	late := led.lateKeys()
	// Never applied: dead letters, purged rows and redriven rows recorded
	// late, unless a copy had arrived and been applied before.
	for _, k := range slices.Concat(slices.Collect(maps.Keys(dead)), slices.Collect(maps.Keys(purged)), slices.Collect(maps.Keys(late))) {
		switch {
		case got[k]:
			require.False(t, late[k], "%s was recorded late and applied", k)
			arrivedDead++ // sent, its success hidden by a fault, then dead
		case !deadNotApplied[k]:
			deadNotApplied[k] = true
			deadAmount += byKey[k].amount
		}
	}
	for k := range late {
		require.True(t, byKey[k].route == routeOrdered, "%s recorded late, but only the route that skips passes places", k)
		led.mu.Lock()
		require.True(t, led.redriven[k], "%s recorded late, but only a redriven row may come late", k)
		led.mu.Unlock()
	}
	for k := range got {
		require.Contains(t, byKey, k, "the ledger names only staged transfers")
	}
	ledgerItems := map[string]map[string]types.AttributeValue{}
	for _, it := range scan(t, db, ledgerTable, "ledger ") {
		ledgerItems[it[consume.AttrPK].(*types.AttributeValueMemberS).Value] = it
	}
	for a := range accounts {
		acct := fmt.Sprintf("acct-%03d", a)
		var stagedTotal, stagedN, wantTotal, wantN int64
		var wantKeys []string
		for _, tr := range all {
			if tr.account != acct {
				continue
			}
			stagedTotal += tr.amount
			stagedN++
			if !deadNotApplied[tr.key] {
				wantTotal += tr.amount
				wantN++
				wantKeys = append(wantKeys, tr.key)
			}
		}
		b := getItem(t, db, bank, "account "+acct)
		require.Equal(t, stagedTotal, num(t, b["staged"]), "%s: the producer's transactions moved what was staged", acct)
		require.Equal(t, stagedN, num(t, b["transfers"]), "%s", acct)
		it := ledgerItems["ledger "+acct]
		if wantN == 0 {
			require.Nil(t, it, "%s: nothing to apply", acct)
			continue
		}
		require.NotNil(t, it, "%s has a ledger", acct)
		keys := it["keys"].(*types.AttributeValueMemberSS).Value
		var keysTotal int64
		for _, k := range keys {
			keysTotal += byKey[k].amount
		}
		require.Equal(t, int64(len(keys)), num(t, it["applied"]), "%s: each transfer applied once: effects applied, transfers applied", acct)
		require.Equal(t, keysTotal, num(t, it["total"]), "%s: the ledger total is the sum of the transfers applied", acct)
		require.ElementsMatch(t, wantKeys, keys, "%s: the transfers applied are those delivered: nothing lost (%d delivered rows missing in all)", acct, len(missing))
		require.Equal(t, wantTotal, num(t, it["total"]), "%s: ledger total", acct)
		var deadHere int64
		for k := range deadNotApplied {
			if byKey[k].account == acct {
				deadHere += byKey[k].amount
			}
		}
		require.Equal(t, stagedTotal, num(t, it["total"])+deadHere, "%s: staged = ledger + dead letters never applied", acct)
		appliedAmount += wantTotal
	}

	// Order: each group's log is its staging order less the dead letters
	// never applied; the gaps the consumer passed are exactly those that
	// precede an applied place, and it refused no copy as passed.
	gapsByGroup := map[string][]gap{}
	for _, g := range gaps {
		gapsByGroup[g.group] = append(gapsByGroup[g.group], g)
	}
	led.mu.Lock()
	closedPlaces := map[string]map[int64]bool{}
	closedCount, lateClosed := 0, led.lateClosed
	for g, places := range led.closed {
		closedPlaces[g] = map[int64]bool{}
		for _, p := range places {
			require.False(t, closedPlaces[g][p], "group %s: place %d closed twice", g, p)
			closedPlaces[g][p] = true
			closedCount++
		}
	}
	led.mu.Unlock()
	// Every place closed is a dead letter's, never applied; every dead
	// letter whose place Outflow closed (its closing message sent) was
	// closed at the consumer, or had arrived and been applied before.
	for g, places := range closedPlaces {
		for p := range places {
			k := groups[g][p-1]
			require.True(t, deadNotApplied[k], "group %s: place %d (%s) closed, but it is no dead letter the consumer never applied", g, p, k)
		}
	}
	for k, row := range dead {
		if row.Closed == outbox.ClosedDeadLetter && deadNotApplied[k] {
			require.True(t, closedPlaces[byKey[k].group][byKey[k].place], "%s's place was closed by Outflow, never at the consumer", k)
		}
	}
	for k, row := range purged {
		if row != nil && deadNotApplied[k] {
			require.True(t, closedPlaces[byKey[k].group][byKey[k].place], "%s was purged, its place closed by Outflow, never at the consumer", k)
		}
	}
	var gapPlaces, orderedRows int
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		keys := groups[id]
		orderedRows += len(keys)
		var want []string
		var wantGaps []gap
		var run *gap
		for i, k := range keys {
			place := int64(i + 1)
			if deadNotApplied[k] && closedPlaces[id][place] {
				// Closed by its message: the cursor moved past it, and a
				// run of places before it was passed as a gap.
				if run != nil {
					wantGaps = append(wantGaps, *run)
					run = nil
				}
				continue
			}
			if deadNotApplied[k] {
				if run == nil {
					run = &gap{group: id, from: place}
				}
				run.to = place
				continue
			}
			want = append(want, k)
			if run != nil {
				wantGaps = append(wantGaps, *run)
				run = nil
			}
		}
		var log []string
		if it := getItem(t, db, ledgerTable, "order "+id); it != nil {
			for _, v := range it["log"].(*types.AttributeValueMemberL).Value {
				log = append(log, v.(*types.AttributeValueMemberS).Value)
			}
		}
		require.Equal(t, want, log, "group %s: effects applied in staging order, gaps only at dead letters", id)
		gotGaps := gapsByGroup[id]
		slices.SortFunc(gotGaps, func(a, b gap) int { return int(a.from - b.from) })
		require.Equal(t, wantGaps, gotGaps, "group %s: the consumer passed exactly the places of dead letters left open as gaps", id)
		for _, g := range gotGaps {
			gapPlaces += int(g.to - g.from + 1)
		}
	}

	// A late copy of a place a gap passed (a dead letter redriven) is told
	// from a gap: refused as ErrPassed, not applied. A redelivered copy of
	// an applied row is a duplicate.
	lateChecked := 0
	var passedPlace *gap
	if len(gaps) > 0 && !late[groups[gaps[0].group][gaps[0].from-1]] {
		passedPlace = &gaps[0]
	}
	for g, places := range closedPlaces {
		for p := range places {
			if !late[groups[g][p-1]] {
				passedPlace = &gap{group: g, from: p, to: p}
			}
		}
	}
	if passedPlace != nil {
		g := *passedPlace
		k := groups[g.group][g.from-1]
		tr := byKey[k]
		m := consume.Message{Key: k, Group: g.group, Seq: g.from, Attempt: 1, Payload: fmt.Appendf(nil, `{"account":%q,"amount":%d}`, tr.account, tr.amount)}
		items, err := inboxes[tr.route].TransactItems(m)
		require.NoError(t, err)
		err = led.run(ctx, inboxes[tr.route], m, led.effect(m, payload{tr.account, tr.amount}), items)
		var order *consume.OrderError
		require.ErrorAs(t, err, &order, "a late copy of %s", k)
		require.False(t, order.Gap(), "a late copy is no gap: %v", err)
		require.ErrorIs(t, err, consume.ErrPassed)
		lateChecked++
	}
	for _, tr := range all {
		if got[tr.key] {
			m := consume.Message{Key: tr.key, Group: tr.group, Seq: tr.place, Attempt: 1}
			items, err := inboxes[tr.route].TransactItems(m)
			require.NoError(t, err)
			err = led.run(ctx, inboxes[tr.route], m, led.effect(m, payload{tr.account, tr.amount}), items)
			require.ErrorIs(t, err, consume.ErrDuplicate, "a second copy of %s", tr.key)
			break
		}
	}
	require.Len(t, applied(), len(got), "the late copies changed nothing")

	var stagedAmount int64
	for _, tr := range all {
		stagedAmount += tr.amount
	}
	reasons := map[string]int{}
	tooLarge := 0
	for k, row := range dead {
		reasons[classify(row.LastError)]++
		if byKey[k].tooLarge {
			tooLarge++
			// The row's own reason: its last error, or, when the message
			// closing its place failed for good after it (closed
			// "unsent"), the history's entry before that failure.
			reason := row.LastError
			if outbox.PlaceOpen(row.Closed) && len(row.Errors) > 1 {
				reason = row.Errors[len(row.Errors)-2].Message
			}
			require.Contains(t, reason, "message too large", "%s: %+v", k, row.Errors)
		}
	}
	planned := 0
	for _, tr := range all {
		if _, isPurged := purged[tr.key]; tr.tooLarge && !isPurged {
			planned++
		}
	}
	require.Equal(t, planned, tooLarge, "every transfer padded past the limit is a dead letter, unless the operator purged it")
	closedByPurge, fairCount := 0, 0
	for _, row := range purged {
		if row != nil {
			closedByPurge++
		}
	}
	for _, tr := range all {
		if tr.fair != "" {
			fairCount++
		}
	}
	var why []string
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		why = append(why, fmt.Sprintf("\n    %-40s %d", r, reasons[r]))
	}
	report := fmt.Sprintf(`end-to-end soak report (seed %d, %d rows, %s)
  producer      %d transactions (account update + outbox row), %d accounts, total %d
                %d ordered rows in %d groups on %s (dead heads skipped), %d on %s
  outflow       %d sweeps (%d crashed), %d rounds
                delivered %d, dead letters %d (%d padded past the limit; %d arrived too, after a fault hid the send)%s
  wire          %s
  queues        visibility 1s; delete entries failed (injected) %d
  consumer      %d applies in %d process lives: %d effects committed, %d duplicates refused, %d refused for a retry (not its turn)
                killed before the effect %d, between effect and delete %d
  ledger        every account: ledger = staged - dead letters never applied (%d = %d - %d): nothing lost, nothing twice
  order         every group in staging order; %d places closed by Outflow's message (%d more after the row arrived), %d gaps passed over %d dead places left open,
                no copy behind its group; a late copy told from a gap: %d checked
  producer      %d transactions run again (a retry after a lost answer): %d refused as staged already, none staged twice
  operator      %d dead heads purged on %s (blocked groups; %d purges held for an unsure send), %d closed by their message;
                %d sends refused for good until the redrive; %d dead letters redriven on %s, %d of them recorded late by the consumer (never applied), the rest dead again or applied;
                %d dead letters on %s whose closing message had failed (holding their groups) purged after the last redrive
  fair queue    %d transfers reached the consumer of %s with a group id, applied with no order check
%s
consumer %s`,
		seed, rows, time.Since(start).Round(time.Second),
		staged.Load(), accounts, stagedAmount,
		orderedRows, len(groups), routeOrdered, rows-orderedRows, routeTransfers,
		sweeps.Load(), crashes.Load(), round,
		rows-len(dead), len(dead), tooLarge, arrivedDead, strings.Join(why, ""),
		wire.summary(), stats.deletesFailed.Load(),
		stats.applies.Load(), stats.lives.Load(), stats.committed.Load(), stats.duplicates.Load(), stats.retried.Load(),
		stats.killedBefore.Load(), stats.killedAfter.Load(),
		appliedAmount, stagedAmount, deadAmount,
		closedCount, lateClosed, len(gaps), gapPlaces, lateChecked,
		retried.Load(), retriedRefused.Load(),
		purges.Load(), routeBlock, purgesHeld.Load(), closedByPurge, refused.Load(), redrives.Load(), routeOrdered, len(late), purgesOpen.Load(), routeOrdered, fairCount, routeTransfers,
		plan.Report(), cplan.Report())
	t.Log("\n" + report)
	if path := os.Getenv("OUTFLOW_E2E_REPORT"); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(report+"\n"), 0o644))
	}
}

// openPlaces lists the dead letters of route whose place's closing
// message could not be sent, as an operator finds them: the dead index,
// then each one's closed.
func openPlaces(ctx context.Context, t *testing.T, op *dynamo.Operator, route string) []string {
	t.Helper()
	refs, err := op.ListDead(ctx, dynamo.DeadQuery{Queue: route}, 0)
	require.NoError(t, err)
	refs, err = op.WithGroups(ctx, refs)
	require.NoError(t, err)
	var keys []string
	for _, d := range refs {
		if outbox.PlaceOpen(d.Closed) {
			keys = append(keys, d.Key)
		}
	}
	return keys
}

// diagnose tells what happened to each copy the consumer refused as
// behind its group, and to its neighbours in the group: Outflow's sends
// as they reached SQS, the rows as Outflow left them, and when the
// consumer applied each.
func diagnose(ctx context.Context, t *testing.T, store *dynamo.Store, wire *wireLog, led *ledger, groups map[string][]string, byKey map[string]transfer, start time.Time) string {
	led.mu.Lock()
	passedKeys := slices.Clone(led.passedKeys)
	appliedAt := maps.Clone(led.appliedAt)
	led.mu.Unlock()
	slices.Sort(passedKeys)
	var b strings.Builder
	for _, k := range slices.Compact(passedKeys) {
		tr := byKey[k]
		keys := groups[tr.group][max(0, tr.place-3):min(int64(len(groups[tr.group])), tr.place+2)]
		fmt.Fprintf(&b, "\n%s, place %d of group %s, arrived behind its group. Places %d to %d:\n", k, tr.place, tr.group, byKey[keys[0]].place, byKey[keys[len(keys)-1]].place)
		for _, key := range keys {
			row, err := store.Get(ctx, key)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "  %s: %v\n", key, err)
			case row == nil:
				fmt.Fprintf(&b, "  %s (place %d): done (deleted)", key, byKey[key].place)
			default:
				unsure := "none"
				if !row.UnsureAt.IsZero() {
					unsure = "clock +" + row.UnsureAt.Sub(start).String()
				}
				fmt.Fprintf(&b, "  %s (place %d): %s at attempt %d, unsure_at %s, errors %+v", key, byKey[key].place, row.Status, row.Attempt, unsure, row.Errors)
			}
			if at, ok := appliedAt[key]; ok {
				fmt.Fprintf(&b, "; applied at %s\n", at.Round(time.Millisecond))
			} else {
				b.WriteString("; never applied\n")
			}
		}
		b.WriteString("  sends, in the order their calls started (wall clock from the soak's start; clock from the soak's start):\n")
		b.WriteString(wire.report(keys, start))
	}
	return b.String()
}

// stage is the producer's business transaction: the account's update and
// the transfer's outbox row, together.
func stage(ctx context.Context, db *dynamodb.Client, p *outflow.Producer, bank string, tr transfer) error {
	account := types.TransactWriteItem{Update: &types.Update{
		TableName:                aws.String(bank),
		Key:                      pk("account " + tr.account),
		UpdateExpression:         aws.String("ADD #staged :a, #n :one"),
		ExpressionAttributeNames: map[string]string{"#staged": "staged", "#n": "transfers"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":a": &types.AttributeValueMemberN{Value: strconv.FormatInt(tr.amount, 10)}, ":one": &types.AttributeValueMemberN{Value: "1"},
		},
	}}
	body := fmt.Sprintf(`{"account":%q,"amount":%d}`, tr.account, tr.amount)
	if tr.tooLarge {
		body = fmt.Sprintf(`{"account":%q,"amount":%d,"memo":%q}`, tr.account, tr.amount, strings.Repeat("x", maxMessage))
	}
	row := outflow.Row{Key: tr.key, Queue: tr.route, Group: tr.group, Payload: []byte(body)}
	var items []types.TransactWriteItem
	if tr.group != "" {
		var err error
		if items, err = p.TransactItems(ctx, row); err != nil {
			return err
		}
	} else {
		item, err := p.TransactItem(row)
		if err != nil {
			return err
		}
		items = []types.TransactWriteItem{item}
	}
	tx := append([]types.TransactWriteItem{account}, items...)
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx}); err != nil {
		return fmt.Errorf("stage %s: %w", tr.key, p.Classify(ctx, err, tx))
	}
	return nil
}

func classify(reason string) string {
	for _, c := range []string{"message too large", string(faults.SendSender), "lease expired", string(faults.SendCall), string(faults.SendEntry), string(faults.SendAmbiguous)} {
		if strings.Contains(reason, c) {
			return c
		}
	}
	return reason
}

func newTable(t *testing.T, db *dynamodb.Client, prefix string) string {
	t.Helper()
	name := awstest.UniqueName("outflow-e2e-" + prefix)
	require.NoError(t, consume.CreateTable(context.Background(), db, name))
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), db, name) })
	return name
}

func getItem(t *testing.T, db *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: pk(key), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

// scan returns the table's items whose key starts with prefix.
func scan(t *testing.T, db *dynamodb.Client, table, prefix string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, it := range out.Items {
			if v, ok := it[consume.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(v.Value, prefix) {
				items = append(items, it)
			}
		}
	}
	return items
}

func num(t *testing.T, v types.AttributeValue) int64 {
	t.Helper()
	n, ok := v.(*types.AttributeValueMemberN)
	require.True(t, ok, "a number: %v", v)
	i, err := strconv.ParseInt(n.Value, 10, 64)
	require.NoError(t, err)
	return i
}
