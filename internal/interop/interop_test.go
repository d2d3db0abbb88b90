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
	"sort"
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
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/streams"
)

// The shape of the run: every producer stages rowsPerGroup rows into each
// of the groups of the one ordered route; each consumer receives at most
// batch messages at a time, so that the two share the groups.
const (
	route        = "interop.fifo"
	groupCount   = 6
	rowsPerGroup = 8
	batch        = 2
	// visibility is the consumers' visibility timeout, in seconds: a
	// message a consumer left comes back after it.
	visibility = 10
	// consumerName is the one consumer the two processes are instances
	// of: they share its inbox items and group cursors.
	consumerName = "interop"
	// idle bounds each wait for a process or for progress: it restarts
	// whenever a process says something, so a loaded machine only makes
	// the test slower.
	idle = 3 * time.Minute
)

// The languages: each producer's keys begin with its prefix, and each
// consumer names its language in the ledger.
const (
	langGo         = "go"
	langPython     = "python"
	langTypeScript = "typescript"
)

var prefixes = map[string]string{langGo: "go-", langPython: "py-", langTypeScript: "ts-"}

// TestInterop_ThreeProducersTwoConsumersOneOrder is the test that mixes
// the languages. Go, Python and TypeScript producers, started at once,
// stage rows into the same six ordered groups of one FIFO route, each
// row in one transaction with a write of the producer's own, racing for
// each group's next place (a lost race is retried, as the packages'
// READMEs say). The dispatcher delivers: the sweep and wake functions'
// code, in process, as the local runner runs it, which also publishes the
// configuration the producers read. A Python and a TypeScript consumer,
// two instances of one consumer (one inbox table, one consumer name),
// receive from the queue at once, a few messages at a time, and apply
// each with their package's Inbox: the effect, a ledger item and the
// group's log, commits in the inbox's transaction.
//
// It asserts that every staged row was applied exactly once (one ledger
// item per key, applied once), that each group's places are 1..n with no
// gap and were applied in that order (the group's log), that each row
// reached the consumer at the place the dispatcher's table gave it, and
// that the place order keeps each producer's own commit order; that every
// producer staged into every group and both consumers applied rows.
func TestInterop_ThreeProducersTwoConsumersOneOrder(t *testing.T) {
	t.Parallel()
	tools := findTools(t)
	start := time.Now()
	phase := func(name string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), name) }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := awstest.DynamoDB(t)

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

	phase("the dispatcher: its first sweep publishes its configuration")
	logs := &tailBuffer{max: 1 << 20}
	d := startDispatcher(ctx, t, db, outboxTable, queueURL, logs)
	pub, err := outflow.LoadPublished(ctx, db, outboxTable)
	require.NoError(t, err, "the sweep published the dispatcher's configuration")
	require.Equal(t, map[string]string{route: queueURL}, pub.Routes)
	require.Equal(t, map[string]string{route: "block"}, pub.Ordered)
	d.run(ctx, t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the dispatcher's warnings and errors, the last:\n%s", logs.warnings(40))
		}
	})

	phase("start the Python and TypeScript producers and consumers; wait until each is ready")
	evs := make(chan event, 1<<14)
	common := tools.env()
	producerEnv := append(slices.Clone(common),
		"OUTFLOW_INTEROP_TABLE="+outboxTable, "OUTFLOW_INTEROP_ROUTE="+route, "OUTFLOW_INTEROP_SHOP="+shop,
		"OUTFLOW_INTEROP_GROUPS="+strings.Join(groups, ","), "OUTFLOW_INTEROP_ROWS="+strconv.Itoa(rowsPerGroup))
	consumerEnv := append(slices.Clone(common),
		"OUTFLOW_INTEROP_QUEUE_URL="+queueURL, "OUTFLOW_INTEROP_INBOX="+inboxTable, "OUTFLOW_INTEROP_LEDGER="+ledger,
		"OUTFLOW_INTEROP_CONSUMER="+consumerName, "OUTFLOW_INTEROP_BATCH="+strconv.Itoa(batch), "OUTFLOW_INTEROP_VISIBILITY="+strconv.Itoa(visibility))
	producers := map[string]*proc{
		langPython:     spawn(t, "the Python producer", []string{tools.python, "producer.py"}, producerEnv, evs),
		langTypeScript: spawn(t, "the TypeScript producer", []string{tools.node, "producer.mjs"}, producerEnv, evs),
	}
	consumers := map[string]*proc{
		langPython:     spawn(t, "the Python consumer", []string{tools.python, "consumer.py"}, consumerEnv, evs),
		langTypeScript: spawn(t, "the TypeScript consumer", []string{tools.node, "consumer.mjs"}, consumerEnv, evs),
	}
	r := newRun(t, evs)
	r.expect(producers, consumers)
	r.waitFor("every process to be ready", func() bool { return r.ready == len(producers)+len(consumers) })

	phase("stage: the three producers at once, into the same groups")
	for _, p := range producers {
		require.NoError(t, p.send("go"))
	}
	goDone := make(chan goReport, 1)
	go func() {
		staged, races, err := stageGo(ctx, db, outboxTable, shop, groups)
		goDone <- goReport{staged: staged, races: races, err: err}
	}()
	r.goDone = goDone
	r.waitFor("the three producers to stage their rows", func() bool { return len(r.staged) == 3 })
	total := 0
	for _, lang := range slices.Sorted(maps.Keys(r.staged)) {
		t.Logf("the %s producer staged %d rows, %d lost races retried", lang, len(r.staged[lang]), r.races[lang])
		total += len(r.staged[lang])
	}
	require.Equal(t, 3*groupCount*rowsPerGroup, total, "rows staged")

	phase("deliver and apply: wait until the ledger holds every row")
	r.wait(fmt.Sprintf("the consumers to apply the %d rows staged", total), time.Second, func() bool {
		return len(scanAll(ctx, t, db, ledger)) >= total+groupCount // a ledger item per row, a log per group
	})

	phase("stop the consumers")
	for _, c := range consumers {
		c.close()
	}
	r.waitFor("the consumers to stop", func() bool { return len(r.done) == len(consumers) })
	for _, lang := range slices.Sorted(maps.Keys(r.done)) {
		c := r.done[lang]
		t.Logf("the %s consumer applied %d rows; %d duplicates, %d late, %d left for later, %d deletes failed; errors: %q",
			lang, c.Counts["applied"], c.Counts["duplicates"], c.Counts["late"], c.Counts["left"], c.Counts["delete_failures"], c.Errors)
	}

	phase("check: each row applied once, each group in order, in every producer's order")
	check(ctx, t, db, checkInput{outbox: outboxTable, ledger: ledger, inbox: inboxTable, shop: shop, groups: groups, staged: r.staged, applied: r.applied})
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
// cold start, and runs one sweep, which publishes the configuration.
func startDispatcher(ctx context.Context, t *testing.T, db *dynamodb.Client, table, queueURL string, logs *tailBuffer) *dispatcher {
	t.Helper()
	env := map[string]string{
		"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": route + "=" + queueURL, "OUTFLOW_ORDERED": route + "=block",
		"OUTFLOW_SHARDS": "4", "OUTFLOW_WAKE_GRACE": "0s", "AWS_LAMBDA_LOG_LEVEL": "WARN",
	}
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, logs)
	require.NoError(t, err, "the dispatcher's setup")
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	d := &dispatcher{sweep: handler.NewSweep(rt), wake: handler.NewWake(rt), stream: aws.ToString(desc.Table.LatestStreamArn)}
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

// run is the test's view of the processes: what each said so far. Only
// the test's goroutine touches it.
type run struct {
	t      *testing.T
	events <-chan event
	goDone <-chan goReport
	// role names each process's language and whether it produces.
	role  map[*proc]string
	isPro map[*proc]bool
	all   []*proc
	// ready counts the processes ready; staged holds each producer's rows
	// by language, races its lost races; applied the consumer that
	// applied each key, and at which group and place; done each
	// consumer's last words.
	ready   int
	staged  map[string][]stagedRow
	races   map[string]int
	applied map[string]appliedAt
	done    map[string]line
}

// appliedAt is where a consumer said it applied a key.
type appliedAt struct {
	by, group string
	seq       int64
}

func newRun(t *testing.T, evs <-chan event) *run {
	return &run{t: t, events: evs, role: map[*proc]string{}, isPro: map[*proc]bool{}, staged: map[string][]stagedRow{},
		races: map[string]int{}, applied: map[string]appliedAt{}, done: map[string]line{}}
}

func (r *run) expect(producers, consumers map[string]*proc) {
	for lang, p := range producers {
		r.role[p], r.isPro[p] = lang, true
		r.all = append(r.all, p)
	}
	for lang, p := range consumers {
		r.role[p] = lang
		r.all = append(r.all, p)
	}
}

// waitFor is wait with cond checked after each event.
func (r *run) waitFor(what string, cond func() bool) {
	r.t.Helper()
	r.wait(what, 0, cond)
}

// wait handles what the processes say until cond holds, checking it
// after each event or, with every above zero, that often instead (a cond
// that reads a table). It fails the test, with the processes' stderr,
// when a process ends before it said all it should or says what it
// should not, or when nothing is said for idle.
func (r *run) wait(what string, every time.Duration, cond func() bool) {
	r.t.Helper()
	timer := time.NewTimer(idle)
	defer timer.Stop()
	var tick <-chan time.Time
	if every > 0 {
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		tick = ticker.C
	}
	for !cond() {
		for progress := false; !progress; {
			select {
			case ev := <-r.events:
				r.handle(what, ev)
				progress = every == 0
				timer.Reset(idle)
			case rep := <-r.goDone:
				if rep.err != nil {
					r.fail("waiting for %s: the Go producer failed: %v", what, rep.err)
				}
				r.staged[langGo], r.races[langGo] = rep.staged, rep.races
				progress = every == 0
				timer.Reset(idle)
			case <-tick:
				progress = true
			case <-timer.C:
				r.fail("waiting for %s: nothing happened for %s; %d rows staged by %d producers, %d applied", what, idle, r.stagedCount(), len(r.staged), len(r.applied))
			}
		}
	}
}

func (r *run) stagedCount() int {
	n := 0
	for _, rows := range r.staged {
		n += len(rows)
	}
	return n
}

// handle takes in one event.
func (r *run) handle(what string, ev event) {
	r.t.Helper()
	p, lang := ev.from, r.role[ev.from]
	l := ev.line
	switch {
	case ev.eof:
		finished := (r.isPro[p] && r.staged[lang] != nil) || (!r.isPro[p] && r.done[lang].Done)
		if !finished || !p.ok() {
			r.fail("waiting for %s: %s ended before it finished", what, p.name)
		}
	case l.Ready:
		r.ready++
	case r.isPro[p] && l.Staged != nil:
		r.staged[lang], r.races[lang] = l.Staged, l.Races
	case !r.isPro[p] && l.Applied != "":
		if prev, ok := r.applied[l.Applied]; ok {
			r.fail("%s applied %s (place %d of %s), which the %s consumer applied already (place %d of %s)",
				p.name, l.Applied, l.Seq, l.Group, prev.by, prev.seq, prev.group)
		}
		r.applied[l.Applied] = appliedAt{by: lang, group: l.Group, seq: l.Seq}
	case !r.isPro[p] && l.Done:
		r.done[lang] = l
	default:
		r.fail("%s said what it should not: %q", p.name, ev.raw)
	}
}

// fail fails the test with every process's stderr.
func (r *run) fail(format string, args ...any) {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, format, args...)
	for _, p := range r.all {
		b.WriteString("\n\n" + p.report())
	}
	r.t.Fatal(b.String())
}

// checkInput is what check compares: the tables, and what the processes
// said.
type checkInput struct {
	outbox, ledger, inbox, shop string
	groups                      []string
	staged                      map[string][]stagedRow
	applied                     map[string]appliedAt
}

// ledgerRow is a ledger item: the consumer's record of one row applied.
type ledgerRow struct {
	key, group, by string
	seq, applies   int64
}

// check compares the tables with what was staged: see the test's doc.
func check(ctx context.Context, t *testing.T, db *dynamodb.Client, in checkInput) {
	t.Helper()
	// What was staged: each producer staged into every group, in its own
	// order.
	byKey := map[string]stagedRow{}
	perGroup := map[string]int{}
	for lang, rows := range in.staged {
		require.Len(t, rows, groupCount*rowsPerGroup, "the %s producer's rows", lang)
		groupsOf := map[string]int{}
		for _, s := range rows {
			require.True(t, strings.HasPrefix(s.Key, prefixes[lang]), "the %s producer staged %s", lang, s.Key)
			require.NotContains(t, byKey, s.Key, "%s staged twice", s.Key)
			byKey[s.Key] = s
			groupsOf[s.Group]++
			perGroup[s.Group]++
		}
		for _, g := range in.groups {
			require.Equal(t, rowsPerGroup, groupsOf[g], "the %s producer's rows in group %s", lang, g)
		}
	}

	// The ledger: one item per key staged, applied once, by one of the
	// consumers, at the place the consumer said.
	led := map[string]ledgerRow{}
	logs := map[string][]string{}
	for _, it := range scanAll(ctx, t, db, in.ledger) {
		pk := str(it["pk"])
		switch {
		case strings.HasPrefix(pk, "applied "):
			lr := ledgerRow{key: str(it["key"]), group: str(it["group"]), by: str(it["consumer"]), seq: num(t, it["seq"]), applies: num(t, it["applies"])}
			require.Equal(t, "applied "+lr.key, pk)
			led[lr.key] = lr
		case strings.HasPrefix(pk, "log "):
			l, ok := it["log"].(*types.AttributeValueMemberL)
			require.True(t, ok, "%s: a list", pk)
			for _, v := range l.Value {
				logs[strings.TrimPrefix(pk, "log ")] = append(logs[strings.TrimPrefix(pk, "log ")], str(v))
			}
		default:
			t.Fatalf("an item the consumers did not write: %s", pk)
		}
	}
	var missing, unknown, twice, unsaid []string
	for key := range byKey {
		if _, ok := led[key]; !ok {
			missing = append(missing, key)
		}
	}
	appliedBy := map[string]int{}
	for key, lr := range led {
		if _, ok := byKey[key]; !ok {
			unknown = append(unknown, key)
		}
		if lr.applies != 1 {
			twice = append(twice, fmt.Sprintf("%s %d times", key, lr.applies))
		}
		if said, ok := in.applied[key]; ok {
			require.Equal(t, appliedAt{by: lr.by, group: lr.group, seq: lr.seq}, said, "%s: the ledger and what its consumer said", key)
		} else {
			// The effect committed and the consumer was told otherwise: its
			// client sent the transaction again after a lost answer, and the
			// inbox refused the copy as a duplicate. Once, still.
			unsaid = append(unsaid, key)
		}
		appliedBy[lr.by]++
	}
	for key, said := range in.applied {
		require.Contains(t, led, key, "the %s consumer said it applied %s: the ledger has no item", said.by, key)
	}
	if len(unsaid) > 0 {
		t.Logf("applied once, but reported as a duplicate by the consumer that applied it (an answer lost): %v", unsaid)
	}
	slices.Sort(missing)
	slices.Sort(unknown)
	slices.Sort(twice)
	require.Empty(t, missing, "rows staged and never applied")
	require.Empty(t, unknown, "rows applied and never staged")
	require.Empty(t, twice, "rows applied more than once")
	require.Len(t, led, len(byKey))
	t.Logf("applied by consumer: %v", appliedBy)
	require.Positive(t, appliedBy[langPython], "the Python consumer applied rows")
	require.Positive(t, appliedBy[langTypeScript], "the TypeScript consumer applied rows")

	// Each group: places 1..n, each at the place the dispatcher's table
	// gave its row, recorded by the inbox at that place, applied in place
	// order (its log), and each producer's rows in the order it committed
	// them.
	outboxRows := byPK(scanAll(ctx, t, db, in.outbox))
	inboxItems := byPK(scanAll(ctx, t, db, in.inbox))
	for _, g := range in.groups {
		var places []ledgerRow
		for _, lr := range led {
			if lr.group == g {
				places = append(places, lr)
			}
		}
		sort.Slice(places, func(i, j int) bool { return places[i].seq < places[j].seq })
		require.Len(t, places, perGroup[g], "group %s: rows applied", g)
		keys := make([]string, len(places))
		for i, lr := range places {
			require.Equal(t, int64(i+1), lr.seq, "group %s: place %d holds %s at place %d: a gap or a place twice", g, i+1, lr.key, lr.seq)
			require.Equal(t, byKey[lr.key].Group, g, "%s: applied in group %s", lr.key, g)
			keys[i] = lr.key
			row := outboxRows[lr.key]
			require.NotNil(t, row, "%s: its row in the dispatcher's table", lr.key)
			require.Equal(t, g, str(row["group"]), "%s: its row's group", lr.key)
			require.Equal(t, lr.seq, num(t, row["seq"]), "%s: applied at place %d, staged at place %d", lr.key, lr.seq, num(t, row["seq"]))
			require.Equal(t, "done", str(row["status"]), "%s: its row is settled as delivered", lr.key)
			rec := inboxItems["inbox "+consumerName+" "+lr.key]
			require.NotNil(t, rec, "%s: its inbox item", lr.key)
			require.Equal(t, lr.seq, num(t, rec["seq"]), "%s: its inbox item's place", lr.key)
		}
		require.Equal(t, keys, logs[g], "group %s: applied in place order", g)
		cursor := inboxItems["cursor "+consumerName+" "+g]
		require.NotNil(t, cursor, "group %s: the consumer's cursor", g)
		require.Equal(t, int64(len(keys)), num(t, cursor["seq"]), "group %s: the consumer's cursor is at its last place", g)
		for lang, rows := range in.staged {
			var mine, theirs []string
			for _, s := range rows {
				if s.Group == g {
					mine = append(mine, s.Key)
				}
			}
			for _, k := range keys {
				if strings.HasPrefix(k, prefixes[lang]) {
					theirs = append(theirs, k)
				}
			}
			require.Equal(t, mine, theirs, "group %s: the %s producer's rows in place order are not in its commit order", g, lang)
		}
		t.Logf("group %s, in place order: %s", g, strings.Join(keys, " "))
	}

	require.Len(t, inboxItems, len(byKey)+groupCount, "the inbox table: an item per row, a cursor per group")

	// Each row committed with its producer's own write.
	shop := byPK(scanAll(ctx, t, db, in.shop))
	for key := range byKey {
		require.Contains(t, shop, key, "%s: its producer's own write", key)
	}
	require.Len(t, shop, len(byKey), "the producers' own writes")
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
