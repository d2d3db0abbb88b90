package leansoak_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Routes: a standard queue, where lean rows go, and a FIFO route listed
// as ordered, whose rows are always in the due index.
const (
	routeEvents  = "events"
	routeOrdered = "ordered.fifo"
)

// The table's due-index shards, and the producers that stage.
const (
	shards    = 2
	producers = 4
)

// timeline is the run's phases, as offsets from its start. The stream
// mapping is off (the outage) for longer than the stream keeps a record,
// so the records of the rows staged in its first part expire unread, and
// those of the rest reach the wake only when it is on again; then the
// stream is throttled. Lean is then switched off, while one producer,
// started before the switch, keeps staging lean rows for staleFor, and
// the mapping is off again for a while in that time (the blip); then
// lean is on again. Staging ends a while later, and the run goes on
// until every row is settled.
type timeline struct {
	// retention is the stream's: a record older than it when the
	// mapping reads it is gone.
	retention            time.Duration
	outageFrom, outageTo time.Duration
	throttleTo           time.Duration // throttled from outageTo
	leanOff, leanOn      time.Duration
	blipFrom, blipTo     time.Duration
	staleFor             time.Duration
	stagingEnd           time.Duration
	// drain is the backstop's OUTFLOW_BACKSTOP_DRAIN: finite here (its
	// default, 0, keeps it running for ever once lean was on) so the run
	// sees it end, and longer than the stale producer's life, as a
	// finite drain must be.
	drain time.Duration
	// settleMin is the least the run goes on after staging ends, and
	// settleMax the most it may take for every row to settle.
	settleMin, settleMax time.Duration
}

// realTimeline is the issue's: the mapping off for 25 hours against the
// stream's 24-hour retention, throttled for 2, lean off for 3.5 with a
// producer 45 minutes stale and a 20-minute blip, a drain of 2 hours.
func realTimeline() timeline {
	tl := timeline{retention: 24 * time.Hour, outageFrom: time.Hour, staleFor: 45 * time.Minute, drain: 2 * time.Hour,
		settleMin: time.Hour, settleMax: 12 * time.Hour}
	tl.outageTo = tl.outageFrom + 25*time.Hour
	tl.throttleTo = tl.outageTo + 2*time.Hour
	tl.leanOff = tl.throttleTo
	tl.blipFrom, tl.blipTo = tl.leanOff+10*time.Minute, tl.leanOff+30*time.Minute
	tl.leanOn = tl.leanOff + 3*time.Hour + 30*time.Minute
	tl.stagingEnd = tl.leanOn + 90*time.Minute
	return tl
}

// scaledTimeline is realTimeline shrunk to fit go test: the stream keeps
// a record 2 hours, and the mapping is off for 2.5 (so again the records
// of the outage's first part expire unread and the rest come late),
// throttled for 40 minutes, lean off for 1 hour 50 with a producer 20
// minutes stale, a 10-minute blip and a drain of an hour. Nothing in
// Outflow knows the stream's retention: what the soak exercises is a
// mapping off for longer than it, whatever its length.
func scaledTimeline() timeline {
	tl := timeline{retention: 2 * time.Hour, outageFrom: 30 * time.Minute, staleFor: 20 * time.Minute, drain: time.Hour,
		settleMin: time.Hour, settleMax: 12 * time.Hour}
	tl.outageTo = tl.outageFrom + 150*time.Minute
	tl.throttleTo = tl.outageTo + 40*time.Minute
	tl.leanOff = tl.throttleTo
	tl.blipFrom, tl.blipTo = tl.leanOff+5*time.Minute, tl.leanOff+15*time.Minute
	tl.leanOn = tl.leanOff + 110*time.Minute
	tl.stagingEnd = tl.leanOn + 40*time.Minute
	return tl
}

// offWindows are the spans the mapping reads nothing: the outage, then
// the blip.
func (tl timeline) offWindows() []window {
	return []window{{tl.outageFrom, tl.outageTo}, {tl.blipFrom, tl.blipTo}}
}

// throttled is the span the mapping is throttled.
func (tl timeline) throttled() window { return window{tl.outageTo, tl.throttleTo} }

// Fault rates and the mix of rows. The wake's faults are drawn per
// invocation while faults are on (until staging ends); the store's and
// SQS's are per write or message attempt (package faults, in newSim).
const (
	crashRate      = 0.05 // the wake dies between send and settle
	outOfTimeRate  = 0.03 // the wake is given no time to send
	redeliverRate  = 0.02 // a batch that went through is handed over again
	throttleDrop   = 0.10 // a record the throttled mapping drops
	delayedShare   = 0.10
	orderedShare   = 0.12
	orderedGroups  = 4
	staleBurstRate = 30 // one row in this many is a stale producer's, staged in the blip
)

// form is the soak's size and the dispatcher's settings it runs with.
type form struct {
	name       string
	when       timeline
	rows       int
	sweepEvery time.Duration
	retention  time.Duration
	pages      int
	pageSize   int
	// progress is how often, in virtual time, the run logs where it is;
	// 0 never.
	progress time.Duration
}

// formFromEnv is the short form, which go test runs, or with
// OUTFLOW_LEAN_SOAK=long the long one. The long form runs the issue's
// timeline, sweeps every minute and keeps delivered rows as done for 24
// hours (the default), so the backstop's pass over the table takes many
// sweeps. The short form runs the scaled timeline, sweeps every 5
// minutes (a legal OUTFLOW_SWEEP_RATE) and deletes delivered rows, so its
// sweeps and backstop runs fit in well under a minute against moto,
// where each request costs milliseconds and a scan time per item.
func formFromEnv() form {
	if os.Getenv("OUTFLOW_LEAN_SOAK") == "long" {
		return form{name: "long", when: realTimeline(), rows: awstest.EnvInt("OUTFLOW_LEAN_SOAK_ROWS", 3000), sweepEvery: time.Minute,
			retention: dynamo.DefaultDoneRetention, pages: 1, pageSize: 250, progress: 3 * time.Hour}
	}
	return form{name: "short", when: scaledTimeline(), rows: awstest.EnvInt("OUTFLOW_LEAN_SOAK_ROWS", 300), sweepEvery: 5 * time.Minute,
		retention: 0, pages: 2, pageSize: 25}
}

type kind int

const (
	kindPlain   kind = iota // unordered, due at once: lean when its producer thinks lean is on
	kindDelayed             // unordered, with a NotBefore: always indexed
	kindOrdered             // on the ordered route: always indexed
)

// Fault windows a row's life crossed. Only the first four may explain a
// second copy: the wake crashed after sending it, its record reached the
// wake twice, or a store or send fault struck it (faults.Plan's duplicate
// windows). An outage, a throttle or an invocation out of time delays a
// row but must never send it twice.
const (
	winCrash = 1 << iota
	winRedelivered
	winOutage
	winThrottle
	winBlip
	winOutOfTime
)

// row is one staged row and what the soak saw of it.
type row struct {
	key      string
	kind     kind
	group    string
	delay    time.Duration
	producer int
	phase    string
	offset   time.Duration // staged at start + offset
	stagedAt time.Time
	lean     bool // staged with no shard
	stale    bool // lean, staged while the dispatcher was not
	windows  int
	// fate is what became of its record: "" (reached the wake),
	// "expired", "dropped" or "discarded" (after streamRetries crashes).
	fate           string
	deliveries     int
	firstDelivered time.Time
}

// tickLog is one scheduled sweep: the backstop's run, then the sweep's.
type tickLog struct {
	at       time.Time
	lean     bool
	backstop dynamo.BackstopResult
	sweep    outbox.Result
}

// tally sums engine results.
type tally struct{ outbox.Result }

func (t *tally) add(r outbox.Result) {
	t.Claimed += r.Claimed
	t.Delivered += r.Delivered
	t.Retried += r.Retried
	t.DeadLettered += r.DeadLettered
	t.Unclaimed += r.Unclaimed
	t.Released += r.Released
	t.Indexed += r.Indexed
	t.Expired += r.Expired
	t.Conflicts += r.Conflicts
	t.Errors += r.Errors
}

// sim is the soak's world: the table, queues and dispatcher on moto, the
// stream and the producers in the soak, all on one virtual clock.
type sim struct {
	t     *testing.T
	f     form
	seed  uint64
	rng   *rand.Rand
	clock *clock
	start time.Time

	db       *dynamodb.Client
	sqs      *sqs.Client
	table    string
	routes   delivery.Routes
	store    *dynamo.Store
	backstop *dynamo.Backstop
	engine   *outbox.Engine
	policy   outbox.Policy
	plan     *faults.Plan
	wire     *wire

	rows  []*row
	byKey map[string]*row
	// lags[p] is how long after each switch (off, then on) producer p
	// reads the new mode.
	lags [producers][2]time.Duration

	pending  []*arrival
	seq      int
	faultsOn bool

	ticks []tickLog
	found map[string]time.Time // by the backstop, when
	wake  tally
	sweep tally
	// The wake's invocations and the stream's redeliveries.
	invocations, crashes, retried, discarded, redelivered, outOfTime int

	mu   sync.Mutex
	errs []error
}

// fail records an error from any goroutine; the run stops at the end of
// its step, and the test fails on it.
func (s *sim) fail(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

// err joins the errors recorded.
func (s *sim) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// TestLeanSoak_NoRowIsLostAndOnlyFaultsSendOneTwice is the lean soak.
// Producers stage rows over 33 virtual hours (the long form; the short
// form's timeline is scaled down), lean (no shard) when they think lean
// is on. The stream brings each row's record to the wake, except through
// a 25-hour outage (records expire unread), a throttled spell (records
// late, some dropped) and a 20-minute blip. The wake crashes between
// send and settle, is retried, is given no time, and is handed batches
// twice; the store and SQS fail writes and sends. Lean is switched off
// and on again mid-run, one producer reading each switch 45 minutes
// late. The backstop and the sweep run on the sweep's schedule. At the
// end every row was delivered or dead-lettered, none is left pending, a
// row went twice only when a fault that may send it twice touched it,
// every row the stream missed was found within the backstop's pass, and
// the backstop's counts are the rows it indexed.
//
// OUTFLOW_LEAN_SOAK=long runs the long form; OUTFLOW_LEAN_SOAK_ROWS sets
// the rows, OUTFLOW_LEAN_SOAK_SEED the seed, OUTFLOW_LEAN_SOAK_REPORT a
// file for the report.
func TestLeanSoak_NoRowIsLostAndOnlyFaultsSendOneTwice(t *testing.T) {
	f := formFromEnv()
	seed := uint64(awstest.EnvInt("OUTFLOW_LEAN_SOAK_SEED", int(time.Now().UnixNano()%1_000_000_007)))
	t.Logf("lean soak, %s form: %d rows, seed %d", f.name, f.rows, seed)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: OUTFLOW_LEAN_SOAK_SEED=%d OUTFLOW_LEAN_SOAK_ROWS=%d OUTFLOW_LEAN_SOAK=%s go test -count=1 -run '^TestLeanSoak_' ./internal/leansoak",
				seed, seed, f.rows, f.name)
		}
	}()
	wall := time.Now()
	ctx := context.Background()
	s := newSim(t, f, seed)

	// Plan the rows, then run the clock until every row has settled.
	s.planRows()
	s.run(ctx)
	require.NoError(t, s.err())

	// Read what the table and the queues hold, and check.
	r := s.results(ctx)
	t.Run("every row is delivered or dead-lettered, and none is left pending", func(t *testing.T) { r.checkNoneLost(t) })
	t.Run("the queues hold what the wire counted", func(t *testing.T) { r.checkQueues(t) })
	t.Run("a row is sent twice only when a fault that may do so touched it", func(t *testing.T) { r.checkDuplicates(t) })
	t.Run("every row the stream missed is found within the backstop's pass", func(t *testing.T) { r.checkMissed(t) })
	t.Run("the backstop's counts are the rows it indexed", func(t *testing.T) { r.checkCounts(t) })
	t.Run("the backstop stops after its drain unless it finds a row", func(t *testing.T) { r.checkDrain(t) })

	report := r.report(time.Since(wall))
	t.Log("\n" + report)
	if path := os.Getenv("OUTFLOW_LEAN_SOAK_REPORT"); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(report), 0o644))
	}
}

// newSim builds the soak's world on the moto server: the table and two
// queues; the dispatcher's store, backstop and engine (one engine for
// the wake and the sweep, as the functions share a configuration) over
// the fault plan, with the crashing deliverer over the SQS router over
// the wire; and the producers' lags.
func newSim(t *testing.T, f form, seed uint64) *sim {
	t.Helper()
	// Virtual time starts an hour ahead of the wall clock and only gains
	// on it, so a context deadline set in virtual time (a wake out of
	// time) never fires on the wall clock: the engine alone reads it.
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	clk := &clock{t: start}
	db := awstest.DynamoDB(t)
	sqsClient := awstest.SQS(t)
	table := awstest.NewTable(t)
	cfg := dynamo.Config{Table: table, Shards: shards, DoneRetention: f.retention}
	store, err := dynamo.New(db, cfg)
	require.NoError(t, err)

	policy := outbox.DefaultPolicy() // WakeGrace 15 s, Lease 5 min, MaxAttempts 8
	policy.Ordered = map[string]outbox.DeadHead{routeOrdered: outbox.DeadHeadSkip}
	policy.HeadWait = 0 // the head wait runs on the wall clock: the sweep takes a row it would wait for
	policy.BatchLinger = 5 * time.Millisecond
	policy.Concurrency = 8

	backstop, err := dynamo.NewBackstop(db, cfg, policy.WakeGrace, true)
	require.NoError(t, err)
	backstop.Pages, backstop.PageSize, backstop.Drain = f.pages, f.pageSize, f.when.drain

	plan := faults.NewPlan(seed, map[faults.Kind]float64{
		faults.SettleBefore: 0.03, faults.SettleAfter: 0.01, faults.ClaimAmbiguous: 0.01,
		faults.SendCall: 0.01, faults.SendEntry: 0.02, faults.SendSender: 0.005, faults.SendAmbiguous: 0.01,
	})
	routes := delivery.Routes{routeEvents: awstest.NewQueueOn(t, sqsClient, false), routeOrdered: awstest.NewQueueOn(t, sqsClient, true)}
	w := newWire(sqsClient, clk)
	router, err := delivery.New(delivery.Clients{SQS: faults.SQS{Next: w, Plan: plan}}, routes, 0)
	require.NoError(t, err)
	engine, err := outbox.New(faults.Store{Store: store, Plan: plan}, crashing{next: router}, policy, outbox.WithClock(clk.Now))
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &sim{t: t, f: f, seed: seed, rng: rng, clock: clk, start: start, db: db, sqs: sqsClient, table: table, routes: routes,
		store: store, backstop: backstop, engine: engine, policy: policy, plan: plan, wire: w,
		byKey: map[string]*row{}, found: map[string]time.Time{}, faultsOn: true}
	for p := range producers {
		s.lags[p] = [2]time.Duration{time.Duration(rng.IntN(121)) * time.Second, time.Duration(rng.IntN(121)) * time.Second}
	}
	s.lags[0] = [2]time.Duration{s.f.when.staleFor, s.f.when.staleFor} // started before each switch, it reads it late
	return s
}

// planRows draws every row: its time, kind and producer. A share of the
// rows goes to each phase of the timeline, and a stale producer's burst
// into the blip, so that some lean rows staged after lean was switched
// off are missed by the stream and found by the backstop.
func (s *sim) planRows() {
	when := s.f.when
	phases := []struct {
		name  string
		w     window
		share float64
	}{
		{"steady", window{0, when.outageFrom}, 0.10},
		{"outage: records expire", window{when.outageFrom, when.outageTo - when.retention}, 0.15},
		{"outage: records late", window{when.outageTo - when.retention, when.outageTo}, 0.15},
		{"throttled", when.throttled(), 0.20},
		{"lean off", window{when.leanOff, when.leanOn}, 0.25},
		{"lean on again", window{when.leanOn, when.stagingEnd}, 0.15},
	}
	burst := max(5, s.f.rows/staleBurstRate)
	n := s.f.rows - burst
	draw := func(phase string, w window, producer int) {
		r := &row{kind: kindPlain, producer: producer, phase: phase,
			offset: w.from + time.Duration(s.rng.Int64N(int64((w.to-w.from)/time.Second)))*time.Second}
		switch x := s.rng.Float64(); {
		case x < delayedShare:
			r.kind, r.delay = kindDelayed, time.Duration(20+s.rng.IntN(581))*time.Second
		case x < delayedShare+orderedShare:
			r.kind, r.group = kindOrdered, fmt.Sprintf("g%d", s.rng.IntN(orderedGroups))
		}
		s.rows = append(s.rows, r)
	}
	for i, ph := range phases {
		count := int(float64(n) * ph.share)
		if i == len(phases)-1 {
			count = n - len(s.rows)
		}
		for range count {
			draw(ph.name, ph.w, s.rng.IntN(producers))
		}
	}
	for range burst {
		draw("lean off: stale burst in the blip", window{when.blipFrom, when.blipTo}, 0)
		s.rows[len(s.rows)-1].kind, s.rows[len(s.rows)-1].group = kindPlain, ""
	}
	slices.SortStableFunc(s.rows, func(a, b *row) int { return int(a.offset - b.offset) })
	for i, r := range s.rows {
		r.key = fmt.Sprintf("ls-%05d", i)
		s.byKey[r.key] = r
	}
}

// producerLean is the mode producer p stages with at offset d: each
// switch reaches it its lag after the dispatcher's.
func (s *sim) producerLean(p int, d time.Duration) bool {
	switch {
	case d >= s.f.when.leanOn+s.lags[p][1]:
		return true
	case d >= s.f.when.leanOff+s.lags[p][0]:
		return false
	}
	return true
}

// dispatcherLean is OUTFLOW_LEAN at offset d.
func (s *sim) dispatcherLean(d time.Duration) bool {
	return d < s.f.when.leanOff || d >= s.f.when.leanOn
}

// arrive is when the mapping hands the wake a record written at written
// and ready at ready, or the record's fate if it never does; it marks
// the windows it crossed on rows.
func (s *sim) arrive(written, ready time.Time, rows ...*row) (time.Time, string) {
	mark := func(win int) {
		for _, r := range rows {
			r.windows |= win
		}
	}
	at := ready
	for i, w := range s.f.when.offWindows() {
		if w.holds(at.Sub(s.start)) {
			at = s.start.Add(w.to)
			mark([]int{winOutage, winBlip}[i])
		}
	}
	if at.Sub(written) >= s.f.when.retention {
		return at, "expired"
	}
	if s.f.when.throttled().holds(at.Sub(s.start)) {
		mark(winThrottle)
		if s.rng.Float64() < throttleDrop {
			return at, "dropped"
		}
		at = at.Add(time.Duration(120+s.rng.IntN(481)) * time.Second)
		if at.Sub(written) >= s.f.when.retention {
			return at, "expired" // held past the retention by the throttle
		}
	}
	return at, ""
}

// stage writes r as its producer would at now, reads its item back as
// the stream's record carries it, and puts the record on the stream.
func (s *sim) stage(ctx context.Context, r *row, now time.Time) error {
	d := now.Sub(s.start)
	o := outbox.Row{Key: r.key, Queue: routeEvents, Payload: fmt.Appendf(nil, `{"n":%q}`, r.key)}
	var err error
	switch r.kind {
	case kindPlain:
		// As Producer.prepare: lean for an unordered row due at once.
		r.lean = s.producerLean(r.producer, d)
		r.stale = r.lean && !s.dispatcherLean(d)
		o.Unindexed = r.lean
		err = s.store.Stage(ctx, o, now)
	case kindDelayed:
		o.NotBefore = now.Add(r.delay)
		err = s.store.Stage(ctx, o, now)
	case kindOrdered:
		o.Queue, o.Group = routeOrdered, r.group
		err = s.store.StageOrdered(ctx, o, now)
	}
	if err != nil {
		return fmt.Errorf("stage %s: %w", r.key, err)
	}
	r.stagedAt = now
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: r.key}}})
	if err != nil {
		return fmt.Errorf("read %s back: %w", r.key, err)
	}
	if _, indexed := out.Item[dynamo.AttrShard]; indexed == r.lean {
		return fmt.Errorf("row %s staged lean=%v, its item has a shard=%v", r.key, r.lean, indexed)
	}
	at, fate := s.arrive(now, now.Add(time.Duration(1+s.rng.IntN(3))*time.Second), r)
	if fate != "" {
		r.fate = fate
		return nil
	}
	s.seq++
	s.pending = append(s.pending, &arrival{at: at, seq: s.seq,
		recs: []*record{{row: r, id: fmt.Sprintf("%s-%d", r.key, s.seq), image: streamImage(out.Item)}}})
	return nil
}

// handBack puts a batch on the stream again at ready (a retry after a
// crash, or a redelivery), less the records that expire meanwhile.
func (s *sim) handBack(b *wakeBatch, ready time.Time, tries int) {
	var rows []*row
	for _, rec := range b.recs {
		rows = append(rows, rec.row)
	}
	oldest := b.recs[0].row.stagedAt
	for _, rec := range b.recs {
		if rec.row.stagedAt.Before(oldest) {
			oldest = rec.row.stagedAt
		}
	}
	at, fate := s.arrive(oldest, ready, rows...)
	var keep []*record
	for _, rec := range b.recs {
		lost := ""
		switch {
		case fate == "dropped":
			lost = fate
		case at.Sub(rec.row.stagedAt) >= s.f.when.retention:
			lost = "expired"
		}
		if lost == "" {
			keep = append(keep, rec)
		} else if rec.row.fate == "" {
			rec.row.fate = lost
		}
	}
	if len(keep) == 0 {
		return
	}
	s.seq++
	s.pending = append(s.pending, &arrival{at: at, seq: s.seq, recs: keep, tries: tries, whole: true})
}

// invoke is one wake invocation on batch b, as the wake's handler runs
// it: the records it keeps (handler.DueInserts), then DeliverRefs.
func (s *sim) invoke(ctx context.Context, b *wakeBatch, now time.Time) (outbox.Result, bool) {
	refs, _ := handler.DueInserts(streamEvent(b.recs), now)
	inv := &invocation{crash: b.crash}
	wctx := context.WithValue(ctx, workerKey{}, "wake")
	var cancel context.CancelFunc
	if b.outOfTime {
		// Its deadline margin already reached: nothing may be sent.
		wctx, cancel = context.WithDeadline(wctx, now.Add(s.policy.DeadlineMargin))
	} else {
		wctx, cancel = context.WithCancel(wctx)
	}
	defer cancel()
	inv.cancel = cancel
	wctx = context.WithValue(wctx, invocationKey{}, inv)
	if len(refs) == 0 {
		return outbox.Result{}, false
	}
	res, err := s.engine.DeliverRefs(wctx, refs)
	if err != nil && !inv.crashed.Load() {
		s.fail(fmt.Errorf("wake at %s: %w", now.Sub(s.start), err))
	}
	return res, inv.crashed.Load()
}

// tick is one scheduled sweep: the backstop's run, then the sweep, as
// the sweep function runs them.
func (s *sim) tick(ctx context.Context, now time.Time) tickLog {
	tl := tickLog{at: now, lean: s.backstop.Lean}
	res, err := s.backstop.Run(ctx, now)
	if err != nil {
		s.fail(fmt.Errorf("backstop at %s: %w", now.Sub(s.start), err))
	}
	tl.backstop = res
	sres, err := s.engine.SweepPartitions(context.WithValue(ctx, workerKey{}, "sweep"), now.Add(s.f.sweepEvery), outbox.Whole)
	if err != nil {
		s.fail(fmt.Errorf("sweep at %s: %w", now.Sub(s.start), err))
	}
	tl.sweep = sres
	return tl
}

// run moves the clock from one event to the next (a row to stage, a
// record due at the wake, a scheduled sweep, a switch) and runs what
// falls due, until staging is over and every row has settled. At each
// step the wake's invocations run one after another (one stream shard)
// while the scheduled sweep, if one is due, runs beside them; the clock
// stands still until both are done.
func (s *sim) run(ctx context.Context) {
	period, when := s.f.sweepEvery, s.f.when
	nextTick, staged, lastCheck := period, 0, time.Duration(-1)
	nextLog, wall := s.f.progress, time.Now()
	switches := []time.Duration{when.leanOff, when.leanOn, when.stagingEnd}
	for {
		next := nextTick
		if staged < len(s.rows) {
			next = min(next, s.rows[staged].offset)
		}
		for _, a := range s.pending {
			next = min(next, a.at.Sub(s.start))
		}
		for _, sw := range switches {
			if sw > 0 {
				next = min(next, sw)
			}
		}
		now := s.start.Add(next)
		s.clock.Set(now)
		for i, sw := range switches {
			if sw > 0 && next >= sw {
				switches[i] = 0
				switch sw {
				case when.leanOff:
					s.backstop.Lean = false
				case when.leanOn:
					s.backstop.Lean = true
				case when.stagingEnd:
					s.faultsOn = false
					s.plan.Stop()
				}
			}
		}
		for ; staged < len(s.rows) && s.rows[staged].offset <= next; staged++ {
			if err := s.stage(ctx, s.rows[staged], now); err != nil {
				s.fail(err)
				return
			}
		}
		due, left := batches(s.pending, now)
		s.pending = left
		for _, b := range due {
			b.crash = s.faultsOn && s.rng.Float64() < crashRate
			b.outOfTime = s.faultsOn && !b.crash && s.rng.Float64() < outOfTimeRate
		}
		results := make([]outbox.Result, len(due))
		crashed := make([]bool, len(due))
		var tl *tickLog
		var wg sync.WaitGroup
		wg.Go(func() {
			for i, b := range due {
				results[i], crashed[i] = s.invoke(ctx, b, now)
			}
		})
		if next == nextTick {
			wg.Go(func() { l := s.tick(ctx, now); tl = &l })
			nextTick += period
		}
		wg.Wait()
		s.afterInvocations(due, results, crashed, now)
		if tl != nil {
			s.ticks = append(s.ticks, *tl)
			s.sweep.add(tl.sweep)
			for _, k := range tl.backstop.Keys {
				if _, again := s.found[k]; again {
					s.fail(fmt.Errorf("the backstop indexed %s twice", k))
				}
				s.found[k] = now
			}
		}
		if s.err() != nil {
			return
		}
		if s.f.progress > 0 && next >= nextLog {
			s.t.Logf("at %s of %s: %d rows staged, %d sweeps, %d rows found by the backstop (%s of wall time)",
				next, when.stagingEnd, staged, len(s.ticks), len(s.found), time.Since(wall).Round(time.Second))
			nextLog += s.f.progress
		}
		late := next > when.stagingEnd+when.settleMax
		if tl != nil && next >= when.stagingEnd+when.settleMin && (len(s.pending) == 0 || late) && (lastCheck < 0 || next-lastCheck >= 30*time.Minute || late) {
			lastCheck = next
			left, err := s.unsettled(ctx)
			switch {
			case err != nil:
				s.fail(err)
				return
			case late:
				s.fail(fmt.Errorf("%d rows still pending or claimed, %d stream arrivals still due, %s after staging ended: %v",
					len(left), len(s.pending), when.settleMax, left))
				return
			case len(left) == 0:
				return
			}
		}
	}
}

// afterInvocations records what the wake's invocations did, and hands
// back to the stream a batch whose invocation crashed (or discards it
// after its retries) and, now and then, one that went through.
func (s *sim) afterInvocations(due []*wakeBatch, results []outbox.Result, crashed []bool, now time.Time) {
	for i, b := range due {
		s.invocations++
		s.wake.add(results[i])
		if b.outOfTime {
			s.outOfTime++
		}
		for _, rec := range b.recs {
			r := rec.row
			if r.deliveries++; r.deliveries == 1 {
				r.firstDelivered = now
			} else {
				r.windows |= winRedelivered
			}
			if crashed[i] {
				r.windows |= winCrash
			}
			if b.outOfTime {
				r.windows |= winOutOfTime
			}
		}
		switch {
		case crashed[i] && b.tries < streamRetries:
			s.crashes++
			s.retried++
			s.handBack(b, now.Add(time.Duration(1+s.rng.IntN(5))*time.Second), b.tries+1)
		case crashed[i]:
			s.crashes++
			s.discarded++
			for _, rec := range b.recs {
				if rec.row.fate == "" {
					rec.row.fate = "discarded"
				}
			}
		case s.faultsOn && s.rng.Float64() < redeliverRate:
			s.redelivered++
			s.handBack(b, now.Add(time.Duration(1+s.rng.IntN(30))*time.Second), b.tries)
		}
	}
}

// scan reads every item's key and status, with strongly consistent
// pages; filter, if set, keeps only pending and claimed ones.
func (s *sim) scan(ctx context.Context, onlyUnsettled bool) (map[string]outbox.Status, error) {
	in := &dynamodb.ScanInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#k, #s"), ExpressionAttributeNames: map[string]string{"#k": dynamo.AttrKey, "#s": dynamo.AttrStatus}}
	if onlyUnsettled {
		in.FilterExpression = aws.String("#s IN (:p, :c)")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberS{Value: string(outbox.StatusPending)}, ":c": &types.AttributeValueMemberS{Value: string(outbox.StatusClaimed)}}
	}
	states := map[string]outbox.Status{}
	for {
		out, err := s.db.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("scan the table: %w", err)
		}
		for _, it := range out.Items {
			k, _ := it[dynamo.AttrKey].(*types.AttributeValueMemberS)
			st, _ := it[dynamo.AttrStatus].(*types.AttributeValueMemberS)
			if k == nil || dynamo.IsReservedKey(k.Value) {
				continue
			}
			states[k.Value] = ""
			if st != nil {
				states[k.Value] = outbox.Status(st.Value)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return states, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// unsettled lists the rows still pending or claimed.
func (s *sim) unsettled(ctx context.Context) ([]string, error) {
	states, err := s.scan(ctx, true)
	keys := make([]string, 0, len(states))
	for k := range states {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, err
}

// drainQueue receives and deletes every message on url, and counts them
// by row key.
func (s *sim) drainQueue(ctx context.Context, url string) (map[string]int, error) {
	got := map[string]int{}
	for {
		out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			VisibilityTimeout: 600, MessageAttributeNames: []string{"All"}})
		if err != nil {
			return got, fmt.Errorf("receive from %s: %w", url, err)
		}
		if len(out.Messages) == 0 {
			return got, nil
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			got[aws.ToString(m.MessageAttributes[delivery.AttrKey].StringValue)]++
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := s.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
			return got, fmt.Errorf("delete from %s: %w", url, err)
		}
	}
}

// dupCause names the fault window that explains a second copy of r, ""
// if none does.
func (s *sim) dupCause(r *row) string {
	switch {
	case r.windows&winCrash != 0:
		return "wake crashed between send and settle"
	case r.windows&winRedelivered != 0:
		return "record handed to the wake twice"
	case s.plan.DuplicateWindows()[r.key] > 0:
		return "settle or send fault (faults.Plan)"
	}
	return ""
}

func windowNames(w int) string {
	var names []string
	for _, n := range []struct {
		bit  int
		name string
	}{{winCrash, "crash"}, {winRedelivered, "redelivered"}, {winOutage, "outage"}, {winThrottle, "throttle"}, {winBlip, "blip"}, {winOutOfTime, "out of time"}} {
		if w&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func (s *sim) rel(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(s.start).String()
}

// explain is what the soak knows of r, for a failure message.
func (s *sim) explain(r *row, states map[string]outbox.Status) string {
	found := "not found by the backstop"
	if at, ok := s.found[r.key]; ok {
		found = "found by the backstop at " + s.rel(at)
	}
	var copies []string
	for _, c := range s.wire.copiesOf(r.key) {
		copies = append(copies, c.by+"@"+s.rel(c.at))
	}
	return fmt.Sprintf("%s (%s, phase %q, producer %d, lean %v, stale %v): staged at %s, state %q, record fate %q, reached the wake %d times (first at %s), windows [%s], %s, copies [%s], plan windows %d",
		r.key, []string{"plain", "delayed", "ordered"}[r.kind], r.phase, r.producer, r.lean, r.stale, s.rel(r.stagedAt), states[r.key], r.fate,
		r.deliveries, s.rel(r.firstDelivered), windowNames(r.windows), found, strings.Join(copies, " "), s.plan.DuplicateWindows()[r.key])
}
