package interop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/streams"
)

// The shape of the run: every producer stages rowsPerGroup rows into each
// of the groups of the one ordered route, of which the dispatcher's
// sender refuses refusedPerGroup per group for good; each consumer is
// killed kills times.
const (
	route           = "interop.fifo"
	groupCount      = 6
	refusedPerGroup = 2
	// visibility is the consumers' visibility timeout, in seconds: what
	// a killed consumer held comes back after it (its groups wait that
	// long), and a consumer renews it every third of it while it applies.
	visibility = 6
	// consumerName is the one consumer the three processes are instances
	// of: they share its inbox items and group cursors.
	consumerName = "interop"
	// idle bounds each wait for progress (see run.wait): it restarts
	// whenever a process says something that moves the run on, so a
	// loaded machine only makes the test slower.
	idle = 3 * time.Minute
)

// The languages: each producer's keys begin with its prefix, and each
// consumer names its language in the ledger.
const (
	langGo         = "go"
	langPython     = "python"
	langTypeScript = "typescript"
)

// rowsPerGroup and kills are 8 and 2 in make test's run, which takes
// 15 to 25 s alone; OUTFLOW_INTEROP_ROWS and OUTFLOW_INTEROP_KILLS make
// a longer one.
var (
	rowsPerGroup = awstest.EnvInt("OUTFLOW_INTEROP_ROWS", 8)
	kills        = awstest.EnvInt("OUTFLOW_INTEROP_KILLS", 2)
)

var (
	langs    = []string{langGo, langPython, langTypeScript}
	prefixes = map[string]string{langGo: "go-", langPython: "py-", langTypeScript: "ts-"}
)

// TestInterop_KilledConsumersInThreeLanguagesAndAnOperatorKeepOneOrder is
// the test that mixes the languages. Go, Python and TypeScript producers,
// started at once, stage rows into the same six ordered groups of one
// FIFO route, each row in one transaction with a write of the producer's
// own, racing for each group's next place (a lost race is retried, as the
// packages' READMEs say). The dispatcher delivers: the sweep and wake
// functions' code, in process, as the local runner runs it (which also
// publishes the configuration the producers read), its sender wrapped to
// refuse two rows of each group for good. A Go, a Python and a TypeScript
// consumer, three instances of one consumer (one inbox table, one
// consumer name), each its package's receive loop bound to its Inbox
// (Go's Inbox.Poller, Python's inbox.poller, TypeScript's inbox.poller),
// receive from the queue at once; the effect, a ledger item and the
// group's log, commits in the inbox's transaction. Each consumer is
// SIGKILLed at a random point (after a random number of outcomes, or a
// few seconds), and started again, twice: mostly while the producers
// stage, the run going on until every kill is done.
//
// The route is ordered with skip: a refused row becomes a dead letter
// whose place the dispatcher closes with its closing message, which the
// inboxes close, and the group goes on. skip rather than block because it
// is the policy under which a dead letter can be redriven after its place
// was closed, the case docs/consuming.md's "Late rows" is about, and
// because under skip no group waits for the operator, whose pace is then
// no part of the run's. An operator, through the API the CLI uses
// (operate.Purge and operate.Redrive on a dynamo.Operator), takes each
// dead letter as it appears, as the producers stage on: one of each
// group purged, the other redriven (its sender no longer refusing it).
//
// It asserts that every row not refused was applied exactly once (one
// ledger item per key, applied once, never said applied twice), at the place
// the dispatcher's table gave it; that each group's places are 1..n, each
// applied or closed exactly once, the applied ones applied in place order
// (the group's log), and that place order keeps each producer's own
// commit order; that a purged row was never applied and its place was
// closed; that a redriven row was recorded late (its inbox item marked
// applied = false with late_after, no effect), acknowledged (reported
// late, or a duplicate of its late record), every copy marked redriven,
// and settled done by the dispatcher; that the queue ends empty, nothing
// left cycling (no message visible or in flight once the consumers
// drained); and that each consumer was killed and each applied rows.
//
// OUTFLOW_INTEROP_SEED sets the seed of the kills and of the rows
// refused; a failure logs it. OUTFLOW_INTEROP_ROWS (8) and
// OUTFLOW_INTEROP_KILLS (2) set the rows per producer and group and the
// kills per consumer.
func TestInterop_KilledConsumersInThreeLanguagesAndAnOperatorKeepOneOrder(t *testing.T) {
	t.Parallel()
	tools := findTools(t)
	seed := uint64(awstest.EnvInt("OUTFLOW_INTEROP_SEED", int(time.Now().UnixNano()%1_000_000_007)))
	t.Logf("seed %d, %d rows per producer and group, %d kills per consumer", seed, rowsPerGroup, kills)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: OUTFLOW_INTEROP_SEED=%d OUTFLOW_INTEROP_ROWS=%d OUTFLOW_INTEROP_KILLS=%d go test -count=1 -run '^%s$' ./internal/interop",
				seed, seed, rowsPerGroup, kills, t.Name())
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start := time.Now()
	phase := func(name string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), name) }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := awstest.DynamoDB(t)
	sqsClient := awstest.SQS(t)

	phase("setup: the outbox table, the FIFO queue, the producers' and consumers' tables")
	outboxTable := awstest.NewTable(t)
	queueURL := awstest.NewQueue(t, true)
	shop := newTable(t, db, "interop-shop", false)
	inboxTable := newTable(t, db, "interop-inbox", true)
	ledger := newTable(t, db, "interop-ledger", false)
	groups := make([]string, groupCount)
	for i := range groups {
		groups[i] = "g" + strconv.Itoa(i)
	}
	plan := planDeadLetters(rng, groups)
	t.Logf("refused for good, to be purged: %v; to be redriven: %v", plan.keys(purge), plan.keys(redrive))

	phase("the dispatcher: its first sweep publishes its configuration")
	logs := &tailBuffer{max: 1 << 20}
	refusal := &refusal{plan: plan, fixed: map[string]bool{}}
	d := startDispatcher(ctx, t, db, outboxTable, queueURL, refusal, logs)
	pub, err := outflow.LoadPublished(ctx, db, outboxTable)
	require.NoError(t, err, "the sweep published the dispatcher's configuration")
	require.Equal(t, map[string]string{route: queueURL}, pub.Routes)
	require.Equal(t, map[string]string{route: "skip"}, pub.Ordered)
	d.run(ctx, t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the dispatcher's warnings and errors, the last:\n%s", logs.warnings(40))
		}
	})
	// The operator, as the CLI opens the table (dynamo.Config{Table,
	// Shards}) and reads the dispatcher's unsure wait for its purges.
	op, err := dynamo.NewOperator(db, dynamo.Config{Table: outboxTable, Shards: pub.Shards})
	require.NoError(t, err)
	published, err := dynamo.ReadPublished(ctx, db, outboxTable)
	require.NoError(t, err)

	phase("start the Python and TypeScript producers and the three consumers; wait until each is ready")
	evs := make(chan event, 1<<14)
	common := tools.env()
	producerEnv := append(slices.Clone(common),
		"OUTFLOW_INTEROP_TABLE="+outboxTable, "OUTFLOW_INTEROP_ROUTE="+route, "OUTFLOW_INTEROP_SHOP="+shop,
		"OUTFLOW_INTEROP_GROUPS="+strings.Join(groups, ","), "OUTFLOW_INTEROP_ROWS="+strconv.Itoa(rowsPerGroup))
	consumerEnv := append(slices.Clone(common),
		"OUTFLOW_INTEROP_QUEUE_URL="+queueURL, "OUTFLOW_INTEROP_INBOX="+inboxTable, "OUTFLOW_INTEROP_LEDGER="+ledger,
		"OUTFLOW_INTEROP_CONSUMER="+consumerName, "OUTFLOW_INTEROP_VISIBILITY="+strconv.Itoa(visibility))
	self, err := os.Executable()
	require.NoError(t, err)
	consumerArgv := map[string][]string{langGo: {self}, langPython: {tools.python, "consumer.py"}, langTypeScript: {tools.node, "consumer.mjs"}}
	r := newRun(t, evs, rng, start, plan)
	r.startConsumer = func(lang string, life int) *proc {
		env := consumerEnv
		if lang == langGo {
			env = append(slices.Clone(consumerEnv), goConsumerEnv+"=1")
		}
		return spawn(t, fmt.Sprintf("the %s consumer (life %d)", lang, life), consumerArgv[lang], env, evs)
	}
	r.producer(langPython, spawn(t, "the Python producer", []string{tools.python, "producer.py"}, producerEnv, evs))
	r.producer(langTypeScript, spawn(t, "the TypeScript producer", []string{tools.node, "producer.mjs"}, producerEnv, evs))
	for _, lang := range langs {
		r.consumer(lang)
	}
	r.waitFor("every process to be ready", func() bool { return r.allReady() })

	phase("stage, kill and operate: the three producers at once into the same groups, each consumer killed and restarted, the operator purging and redriving")
	for _, p := range r.producers {
		require.NoError(t, p.send("go"))
	}
	goDone := make(chan goReport, 1)
	go func() {
		staged, races, err := stageGo(ctx, db, outboxTable, shop, groups)
		goDone <- goReport{staged: staged, races: races, err: err}
	}()
	r.goDone = goDone
	opDone := make(chan opReport, 1)
	go func() { opDone <- operateDeadLetters(ctx, op, plan, refusal, operate.HoldWait(published.UnsureWait)) }()
	r.opDone = opDone
	r.chaos = true
	r.wait("the producers to stage, the operator to act on every dead letter and each consumer to be killed", 100*time.Millisecond, func() bool {
		return len(r.staged) == 3 && r.operated != nil && r.killedEnough()
	})
	r.chaos = false
	total := 0
	for _, lang := range slices.Sorted(maps.Keys(r.staged)) {
		t.Logf("the %s producer staged %d rows, %d lost races retried", lang, len(r.staged[lang]), r.races[lang])
		total += len(r.staged[lang])
	}
	require.Equal(t, 3*groupCount*rowsPerGroup, total, "rows staged")
	for _, n := range r.operated.notes {
		t.Logf("the operator: %s", n)
	}
	purged, redriven := r.operated.purged, r.operated.redriven
	t.Logf("the operator purged %v and redrove %v", slices.Sorted(maps.Keys(purged)), slices.Sorted(maps.Keys(redriven)))
	phase(fmt.Sprintf("kills: %v", r.kills))

	phase("drain: wait until every place is applied or closed, every redriven row recorded late, every row settled, and the queue empty")
	want := total - len(purged) - len(redriven)
	var last drainState
	r.wait("the consumers to drain the queue", time.Second, func() bool {
		last = drained(ctx, t, db, sqsClient, drainInput{outbox: outboxTable, ledger: ledger, inbox: inboxTable, queueURL: queueURL, purged: purged, redriven: redriven})
		r.progress(last.String())
		if last.applied > want {
			r.fail("the ledger holds %d rows applied, of %d to apply: a dead letter applied, or a row no producer staged (%s)", last.applied, want, last)
		}
		return last.applied == want && last.done(len(purged), len(redriven))
	})

	phase("stop the consumers")
	r.stopConsumers()
	for _, lang := range langs {
		c := r.done[lang]
		t.Logf("the %s consumer: killed %d times; outcomes %v over its lives, %v in its last", lang, r.kills[lang], r.outcomes[lang], c.Counts)
	}

	phase("check: each row applied once or its place closed, each group in order, in every producer's order, late rows recorded late, nothing left in the queue")
	check(ctx, t, db, sqsClient, checkInput{outbox: outboxTable, ledger: ledger, inbox: inboxTable, shop: shop, queueURL: queueURL, groups: groups,
		staged: r.staged, said: r.said, purged: purged, redriven: redriven})
	for _, lang := range langs {
		require.GreaterOrEqual(t, r.kills[lang], 1, "the %s consumer was killed", lang)
	}
	phase("done")
}

// tools are the other languages' interpreters and packages.
type tools struct {
	root, python, node, typescript string
}

// findTools finds the Python package's virtualenv and the TypeScript
// package's dependencies and build, which make python-test and make
// typescript-test make (make test runs both before the Go tests). Missing,
// the test fails, naming the target: skipped, it would prove nothing.
func findTools(t *testing.T) tools {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	tl := tools{root: root, python: filepath.Join(root, "python", ".venv", "bin", "python"), typescript: filepath.Join(root, "typescript")}
	need := func(path, what, fix string) {
		t.Helper()
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s is missing (%s): run `%s` in %s first (make test does)", what, path, fix, root)
		}
	}
	need(tl.python, "the Python package's virtualenv", "make python-test")
	need(filepath.Join(tl.typescript, "node_modules", "@aws-sdk", "client-dynamodb"), "the TypeScript package's dependencies", "make typescript-test")
	need(filepath.Join(tl.typescript, "node_modules", "@aws-sdk", "client-sqs"), "the TypeScript package's SQS client (a peer dependency its Poller loads)", "make typescript-test")
	need(filepath.Join(tl.typescript, "dist", "src", "index.js"), "the TypeScript package's build", "make typescript-test")
	need(filepath.Join(tl.typescript, "dist", "src", "consume", "index.js"), "the TypeScript consumer's build", "make typescript-test")
	if stale := staleBuild(t, tl.typescript); len(stale) > 0 {
		t.Fatalf("the TypeScript package's build (typescript/dist) is older than its sources %v: run `make typescript-test` (or `cd typescript && npm run build`) in %s first (make test does)", stale, root)
	}
	tl.node, err = exec.LookPath("node")
	if err != nil {
		t.Fatalf("no node on PATH: the TypeScript producer and consumer need Node 20 or later (make typescript-test does too)")
	}
	return tl
}

// staleBuild lists the TypeScript package's sources (src/**/*.ts) whose
// compiled dist/src/**/*.js is missing or older: the processes would run
// other code than the sources say.
func staleBuild(t *testing.T, pkg string) []string {
	t.Helper()
	var stale []string
	src := filepath.Join(pkg, "src")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".ts") || strings.HasSuffix(path, ".d.ts") {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		ts, err := d.Info()
		if err != nil {
			return err
		}
		js, err := os.Stat(filepath.Join(pkg, "dist", "src", strings.TrimSuffix(rel, ".ts")+".js"))
		if err != nil || js.ModTime().Before(ts.ModTime()) {
			stale = append(stale, filepath.ToSlash(filepath.Join("src", rel)))
		}
		return nil
	})
	require.NoError(t, err, "read the TypeScript package's sources")
	return stale
}

// env is the environment the processes get besides this one's: the test
// endpoint, its region and, unless AWS credentials are set, test ones (as
// awstest.Config does); the TypeScript package's directory.
func (tl tools) env() []string {
	env := []string{
		"AWS_ENDPOINT_URL=" + awstest.Endpoint(), "AWS_REGION=" + region(), "AWS_DEFAULT_REGION=" + region(),
		"OUTFLOW_INTEROP_TYPESCRIPT=" + tl.typescript, "PYTHONDONTWRITEBYTECODE=1",
		// The SDK's notice that its releases after January 2027 need Node
		// 22 (the package says Node 20+): noise in a failure's stderr.
		"AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true",
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		env = append(env, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	}
	return env
}

// region is the test endpoint's region, as awstest.Config picks it.
func region() string {
	if r := os.Getenv("AWS_REGION"); r != "" {
		return r
	}
	return "us-east-1"
}

// newTable creates a table with a string partition key pk, deleted after
// the test: an inbox table as consume.CreateTable makes it, or a plain one.
func newTable(t *testing.T, db *dynamodb.Client, prefix string, inbox bool) string {
	t.Helper()
	ctx := context.Background()
	name := awstest.UniqueName(prefix)
	if inbox {
		require.NoError(t, consume.CreateTable(ctx, db, name))
	} else {
		_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		require.NoError(t, err)
		require.NoError(t, dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute))
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// dispatcher is the sweep and wake functions' code in process, over one
// runtime, as the local runner calls it: the sweep on a schedule, the
// wake on the table's stream.
type dispatcher struct {
	rt     *handler.Runtime
	sweep  *handler.Sweep
	wake   *handler.Wake
	stream string
	// failures counts invocations that returned an error; wg the loops.
	mu       sync.Mutex
	failures []string
	wg       sync.WaitGroup
}

// schedulerEvent is what EventBridge Scheduler sends the sweep.
const schedulerEvent = `{"version":"0","id":"interop","detail-type":"Scheduled Event","source":"aws.scheduler","detail":"{}"}`

// invocation is a function's timeout here: each invocation runs with a
// deadline, as in Lambda.
const invocation = time.Minute

// startDispatcher sets the functions up from their environment, as at a
// cold start, with one change: the engine's sender is the runtime's own
// wrapped in refusal, which refuses the rows it picks for good. Then it
// runs one sweep, which publishes the configuration.
func startDispatcher(ctx context.Context, t *testing.T, db *dynamodb.Client, table, queueURL string, refusal *refusal, logs *tailBuffer) *dispatcher {
	t.Helper()
	env := map[string]string{
		"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": route + "=" + queueURL, "OUTFLOW_ORDERED": route + "=skip",
		"OUTFLOW_SHARDS": "4", "OUTFLOW_WAKE_GRACE": "0s", "AWS_LAMBDA_LOG_LEVEL": "WARN",
	}
	awsCfg := awstest.TestConfig(t)
	rt, err := handler.Setup(awsCfg, func(k string) string { return env[k] }, logs)
	require.NoError(t, err, "the dispatcher's setup")
	// The engine handler.Setup builds, over a sender that refuses: the
	// same store and sender, built as it builds them.
	call := rt.Config.Policy.CallTimeout()
	store, err := dynamo.New(dynamo.WithCallTimeout(dynamodb.NewFromConfig(awsCfg), call), rt.Config.Store)
	require.NoError(t, err)
	sender, err := delivery.New(delivery.ClientsFromConfig(awsCfg).WithCallTimeout(call), rt.Config.Routes, rt.Config.MaxMessageBytes)
	require.NoError(t, err)
	rt.Engine, err = outbox.New(store, faults.Refuse{Next: sender, Fail: refusal.fail}, rt.Config.Policy, outbox.WithLogger(rt.Log))
	require.NoError(t, err)
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	d := &dispatcher{rt: rt, sweep: handler.NewSweep(rt), wake: handler.NewWake(rt), stream: aws.ToString(desc.Table.LatestStreamArn)}
	require.NotEmpty(t, d.stream, "the outbox table's stream")
	sctx, cancel := context.WithTimeout(ctx, invocation)
	defer cancel()
	_, err = d.sweep.Handle(sctx, json.RawMessage(schedulerEvent))
	require.NoError(t, err, "the first sweep")
	return d
}

// run starts the sweep's schedule and the wake's stream mapping, until
// the test ends.
func (d *dispatcher) run(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() {
		cancel()
		d.wg.Wait()
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.failures) > 0 {
			t.Errorf("%d dispatcher invocations failed, the first: %s", len(d.failures), d.failures[0])
		}
	})
	fail := func(what string, err error) {
		if ctx.Err() == nil {
			d.mu.Lock()
			d.failures = append(d.failures, what+": "+err.Error())
			d.mu.Unlock()
		}
	}
	// The schedule: a sweep every second, the next starting when
	// the last one ended.
	d.wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sctx, cancel := context.WithTimeout(ctx, invocation)
			_, err := d.sweep.Handle(sctx, json.RawMessage(schedulerEvent))
			cancel()
			if err != nil {
				fail("sweep", err)
			}
		}
	})
	// The wake's event source mapping: the stream from its start, polled
	// every tenth of a second, in batches of 100 records.
	poller := streams.NewPoller(dynamodbstreams.NewFromConfig(awstest.TestConfig(t)), d.stream, streamtypes.ShardIteratorTypeTrimHorizon)
	d.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			recs, err := poller.Poll(ctx, 1000)
			if err != nil {
				fail("stream poll", err)
				continue
			}
			ev := streams.Event(d.stream, region(), recs)
			for start := 0; start < len(ev.Records); start += 100 {
				wctx, cancel := context.WithTimeout(ctx, invocation)
				_, err := d.wake.Handle(wctx, events.DynamoDBEvent{Records: ev.Records[start:min(start+100, len(ev.Records))]})
				cancel()
				if err != nil {
					fail("wake", err)
				}
			}
		}
	})
}

// goReport is what the Go producer staged, in its commit order.
type goReport struct {
	staged []stagedRow
	races  int
	err    error
}

// tries bounds a producer's tries of one row.
const tries = 500

// stageGo is the Go producer: rowsPerGroup rows into each group, in
// turn, each in one transaction with a write of its own, as the Python
// and TypeScript producers stage theirs.
func stageGo(ctx context.Context, db *dynamodb.Client, table, shop string, groups []string) ([]stagedRow, int, error) {
	pub, err := outflow.LoadPublished(ctx, db, table)
	if err != nil {
		return nil, 0, err
	}
	cfg, err := pub.Apply(outflow.Config{})
	if err != nil {
		return nil, 0, err
	}
	p, err := outflow.NewProducer(db, cfg)
	if err != nil {
		return nil, 0, err
	}
	var staged []stagedRow
	races := 0
	for i := range rowsPerGroup {
		for _, g := range groups {
			key := fmt.Sprintf("go-%s-%03d", g, i)
			payload, _ := json.Marshal(map[string]any{"lang": langGo, "group": g, "index": i})
			row := outflow.Row{Key: key, Queue: route, Group: g, Payload: payload, Attributes: map[string]string{"lang": langGo}}
			own := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(shop), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: key}, "lang": &types.AttributeValueMemberS{Value: langGo},
			}}}
			for try := 1; ; try++ {
				_, err := p.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{own}}, row)
				if err == nil || errors.Is(err, outflow.ErrAlreadyStaged) { // already staged: an earlier try committed, its answer lost
					break
				}
				var te *outflow.TransactError
				if !errors.As(err, &te) || !te.Retryable() || try == tries {
					return staged, races, fmt.Errorf("stage %s (try %d): %w", key, try, err)
				}
				if errors.Is(err, outflow.ErrGroupRace) {
					races++
				}
				time.Sleep(time.Millisecond + rand.N(19*time.Millisecond)) // back off, then race again
			}
			staged = append(staged, stagedRow{Key: key, Group: g})
		}
	}
	return staged, races, nil
}

func scanAll(ctx context.Context, t *testing.T, db *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err, "scan %s", table)
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		start = out.LastEvaluatedKey
	}
}

// byPK maps items by their partition key.
func byPK(items []map[string]types.AttributeValue) map[string]map[string]types.AttributeValue {
	out := make(map[string]map[string]types.AttributeValue, len(items))
	for _, it := range items {
		out[str(it["pk"])] = it
	}
	return out
}

func str(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func num(t *testing.T, v types.AttributeValue) int64 {
	t.Helper()
	n, ok := v.(*types.AttributeValueMemberN)
	require.True(t, ok, "a number: %#v", v)
	i, err := strconv.ParseInt(n.Value, 10, 64)
	require.NoError(t, err)
	return i
}

// tailBuffer keeps the last max bytes written to it: the dispatcher's log.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// warnings is the last n lines of the log that are not metrics (the
// functions log at WARN here, and their metrics at the log's level).
func (b *tailBuffer) warnings(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var lines []string
	for l := range strings.Lines(string(b.buf)) {
		if !strings.Contains(l, `"_aws":`) {
			lines = append(lines, strings.TrimRight(l, "\n"))
		}
	}
	if len(lines) == 0 {
		return "(none)"
	}
	return tail(strings.Join(lines, "\n"), n)
}
