// Command outflow-bench measures Outflow and writes docs/benchmarks.md and
// its plot: engine overhead, pipelining against a naive baseline and the
// ideal bound, requests and write units per message against the moto
// server, the same per kind of target (SQS, SNS, EventBridge) and for
// ordered groups, throughput for ordered groups, memory over a large
// backlog, bootstrap size and init time under the Lambda Runtime Interface
// Emulator, and wake latency through the local runner. Run it with `make
// bench`; the row-count flags make a quicker, smaller run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/local"
	"github.com/outflowhq/outflow/internal/moto"
	"github.com/outflowhq/outflow/internal/rie"
)

func main() {
	out := flag.String("out", "docs", "directory for benchmarks.md and the plot")
	memory := flag.Int("memory", 0, "internal: measure one backlog size in this process and print JSON")
	motoRows := flag.Int("moto-rows", 10000, "rows to drain against moto")
	naiveRows := flag.Int("naive-rows", 2000, "rows the naive baseline drains against moto")
	orderedRows := flag.Int("ordered-rows", 1000, "ordered rows to drain against moto, in groups of 1 and of 5")
	hotRows := flag.Int("hot-rows", 1000, "rows of the one hot group, under the latency fakes")
	groups := flag.Int("groups", 1000, "groups of 5 rows, under the latency fakes")
	capFrom := flag.String("capacity-report", "", "render capacity.md from this saved model report instead of running the model")
	capKeep := flag.String("capacity-save", "", "save the capacity model's report (JSON) in this file")
	deadLetters := flag.Int("dead-letters", 10_000, "dead letters for -only operators")
	flag.Parse()
	if *only == "operators" {
		if err := runOperators(*out, *deadLetters); err != nil {
			fmt.Fprintln(os.Stderr, "outflow-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *only == "targets" {
		if err := runTargetsOnly(*out, *targetRows); err != nil {
			fmt.Fprintln(os.Stderr, "outflow-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *only == "capacity" {
		rep, err := capacityModel(*out, *capFrom, *capKeep)
		if err == nil {
			err = spliceCapacity(filepath.Join(*out, "benchmarks.md"), rep)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "outflow-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *only == "backstop" {
		if err := runBackstopOnly(*backstopTable, *backstopPayload); err != nil {
			fmt.Fprintln(os.Stderr, "outflow-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *only == "memory" {
		if err := runMemoryOnly(*out); err != nil {
			fmt.Fprintln(os.Stderr, "outflow-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *memory > 0 {
		_ = json.NewEncoder(os.Stdout).Encode(bench.SweepMemory(*memory))
		return
	}
	n := sizes{moto: *motoRows, naive: *naiveRows, ordered: *orderedRows, hot: *hotRows, groups: *groups, targets: *targetRows}
	if *only != "" {
		if err := runOnly(*only, *out, n); err != nil {
			fmt.Fprintln(os.Stderr, "outflow-bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*out, n, *capKeep); err != nil {
		fmt.Fprintln(os.Stderr, "outflow-bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

// sizes are the row counts of the runs.
type sizes struct {
	moto, naive, ordered, hot, groups, targets int
}

func run(out string, n sizes, capKeep string) error {
	motoRows, naiveRows := n.moto, n.naive
	ctx := context.Background()
	var doc strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&doc, format+"\n", args...) }
	started := time.Now()
	goals := [][4]string{}
	goal := func(name, target, measured string, ok bool) {
		verdict := "met"
		if !ok {
			verdict = "**missed**"
		}
		goals = append(goals, [4]string{name, target, measured, verdict})
	}

	// Engine overhead.
	logf("engine overhead")
	sweep := testing.Benchmark(bench.SweepOverhead(1000))
	wake := testing.Benchmark(bench.WakeOverhead(100))
	extra := func(r testing.BenchmarkResult, k string) float64 { return r.Extra[k] }

	// Pipelining.
	logf("pipelining")
	storeLat, sendLat := 5*time.Millisecond, 15*time.Millisecond
	concs := []int{1, 2, 4, 8, 16, 32}
	var pipe, ideal, conc []float64
	for _, c := range concs {
		t := bench.PipelinedSweep(max(400, c*120), c, storeLat, sendLat)
		pipe = append(pipe, t.RowsPerS)
		ideal = append(ideal, bench.IdealBound(c, storeLat, sendLat))
		conc = append(conc, float64(c))
	}
	naive := bench.NaiveSweep(100, storeLat, sendLat)
	naiveLine := make([]float64, len(concs))
	for i := range naiveLine {
		naiveLine[i] = naive.RowsPerS
	}
	plotPath := filepath.Join(out, "bench-pipelining.svg")
	if err := bench.PlotLines(plotPath, "One sweep, 5 ms DynamoDB and 15 ms SQS latency", "claim concurrency", "rows per second",
		bench.Series{Name: "Outflow sweep", X: conc, Y: pipe}, bench.Series{Name: "ideal bound", X: conc, Y: ideal},
		bench.Series{Name: "naive one-at-a-time", X: conc, Y: naiveLine}); err != nil {
		return err
	}

	// Against moto.
	logf("moto: draining %d rows with the engine", motoRows)
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	eng, err := bench.DrainOnEndpoint(ctx, srv.URL, motoRows, 200, false)
	if err != nil {
		return err
	}
	logf("moto: draining %d rows one at a time", naiveRows)
	nv, err := bench.DrainOnEndpoint(ctx, srv.URL, naiveRows, 200, true)
	if err != nil {
		return err
	}

	// Each kind of target against moto.
	targets, err := drainTargets(ctx, srv.URL, n.targets)
	if err != nil {
		return err
	}
	logf("consume: write units per message by mode")
	consumeModes, err := bench.ConsumeModes(ctx, srv.URL, *consumeMessages)
	if err != nil {
		return err
	}

	// Ordered groups against moto, and under the latency fakes.
	logf("moto: draining %d ordered rows, in groups of 1 and of 5", n.ordered)
	ord1, err := bench.DrainOrderedOnEndpoint(ctx, srv.URL, n.ordered, 1, 200)
	if err != nil {
		return err
	}
	ord5, err := bench.DrainOrderedOnEndpoint(ctx, srv.URL, n.ordered, 5, 200)
	if err != nil {
		return err
	}
	logf("ordered groups under the latency fakes")
	groupRuns, err := groupThroughput(n.hot, n.groups, storeLat, sendLat)
	if err != nil {
		return err
	}

	// Memory, each size in a fresh process.
	logf("memory")
	mems, err := measureMemory()
	if err != nil {
		return err
	}

	// Lambda.
	logf("lambda: sizes and cold starts")
	binSizes, inits, err := lambdaFigures(ctx, srv.URL)
	if err != nil {
		return err
	}

	// Wake latency.
	logf("wake latency")
	lat, err := wakeLatency(ctx, 200)
	if err != nil {
		return err
	}
	p50, p99 := bench.Percentiles(lat)

	wakes, err := runWakePaths(ctx, srv.URL, wakePathRows)
	if err != nil {
		return err
	}

	// Write it up.
	perMsg := func(r bench.MotoResult, n float64) float64 { return n / float64(r.Throughput.Rows) }
	sqsReq := perMsg(eng, float64(eng.Dispatch.Total("SQS", false)))
	ddbWrites := perMsg(eng, float64(eng.Dispatch.Total("DynamoDB", true)))
	ddbAll := perMsg(eng, float64(eng.Dispatch.Total("DynamoDB", false)))
	wcu := perMsg(eng, eng.Stage.WCU(bench.IndexWrites)+eng.Dispatch.WCU(bench.IndexWrites))
	wcuMoving := perMsg(eng, eng.Stage.WCU(bench.MovingClaimIndexWrites)+eng.Dispatch.WCU(bench.MovingClaimIndexWrites))
	idx16 := slices.Index(concs, 16)

	goal("SQS requests per message", "≤ 0.11", fmt.Sprintf("%.3f", sqsReq), sqsReq <= 0.11)
	goal("DynamoDB write requests per delivered message (no faults)", "≤ 2.05", fmt.Sprintf("%.3f", ddbWrites), ddbWrites <= 2.05)
	goal("WCU per delivered message (rows ≤ 1 KB)", "≤ 5", fmt.Sprintf("%.2f", wcu), wcu <= 5)
	wakeFree := wakeWCU(wakes.free)
	goal("WCU per wake-delivered message, claim-free (rows ≤ 1 KB)", "≤ 4.0", fmt.Sprintf("%.2f (claimed: %.2f)", wakeFree, wakeWCU(wakes.claimed)), wakeFree <= 4.0)
	leanWCU := wakeWCU(wakes.lean)
	goal("WCU per lean message, none on the due index (rows ≤ 1 KB)", "≤ 2.0", fmt.Sprintf("%.2f (due index: %.2f)", leanWCU, wakeIndexWCU(wakes.lean)), leanWCU <= 2.0 && wakeIndexWCU(wakes.lean) == 0)
	goal("pipelined sweep vs naive (latency fakes, concurrency 16)", "≥ 10×", fmt.Sprintf("%.0f×", pipe[idx16]/naive.RowsPerS), pipe[idx16]/naive.RowsPerS >= 10)
	goal("pipelined sweep vs ideal bound (concurrency 16)", "≥ 70%", fmt.Sprintf("%.0f%%", 100*pipe[idx16]/ideal[idx16]), pipe[idx16]/ideal[idx16] >= 0.7)
	goal("engine CPU per row (sweep)", "< 20 µs", fmt.Sprintf("%.1f µs", extra(sweep, "cpu-ns/row")/1000), extra(sweep, "cpu-ns/row") < 20000)
	goal("allocations per row (sweep)", "< 40", fmt.Sprintf("%.1f", extra(sweep, "allocs/row")), extra(sweep, "allocs/row") < 40)
	memoryGoals(mems, goal)
	initMed := median(inits)
	goal("init duration under RIE (median)", "< 100 ms", fmt.Sprintf("%.1f ms", initMed), initMed < 100)
	maxSize := slices.Max([]int64{binSizes["sweep"], binSizes["wake"]})
	goal("bootstrap size (linux/arm64)", "< 20 MB", fmt.Sprintf("%.1f MB", float64(maxSize)/1e6), maxSize < 20e6)
	misordered := int64(ord1.OutOfOrder + ord5.OutOfOrder)
	for _, c := range groupRuns {
		misordered += c.ordered.OutOfOrder
	}
	goal(goalMisordered, "0", strconv.FormatInt(misordered, 10), misordered == 0)
	hotLinks := groupRuns[0].ordered.PerRow("Link")
	goal(goalHotLinks, "≤ 2", fmt.Sprintf("%.2f (%d rows)", hotLinks, groupRuns[0].rows), hotLinks <= 2)
	capRep, err := capacityModel(out, "", capKeep)
	if err != nil {
		return err
	}
	capacityGoal(capRep, goal)

	w("# Benchmarks")
	w("")
	w("Generated by `make bench` (`go run ./cmd/outflow-bench`) on %s, in %s, on a 2-core machine. Every figure below comes from that run; rerun to refresh. Ratios compare runs made side by side in the same process; absolute numbers depend on the machine.", time.Now().UTC().Format("2006-01-02"), time.Since(started).Round(time.Second))
	w("")
	w("## Goals")
	w("")
	w("| goal | target | measured | |")
	w("| --- | --- | --- | --- |")
	for _, g := range goals {
		w("| %s | %s | %s | %s |", g[0], g[1], g[2], g[3])
	}
	w("")
	w("## Engine overhead (zero-latency fakes)")
	w("")
	w("`go test -bench . ./internal/outbox` runs the same benchmarks. The synthetic store and sink cost almost nothing, so this is the engine's own cost per row, including the fakes' small allocations (keys, tokens).")
	w("")
	w("| path | rows per op | wall ns/row | CPU ns/row | allocs/row | bytes/row |")
	w("| --- | --- | --- | --- | --- | --- |")
	for _, b := range []struct {
		name string
		rows int
		r    testing.BenchmarkResult
	}{{"sweep", 1000, sweep}, {"wake (DeliverKeys)", 100, wake}} {
		w("| %s | %d | %.0f | %.0f | %.1f | %.0f |", b.name, b.rows, extra(b.r, "ns/row"), extra(b.r, "cpu-ns/row"), extra(b.r, "allocs/row"), extra(b.r, "B/row"))
	}
	w("")
	w("## Pipelining (5 ms per DynamoDB call, 15 ms per SQS call)")
	w("")
	w("One sweep, against fakes that sleep for the latency, next to the naive baseline (query, then claim, send and settle one row at a time) and the ideal bound: with *c* workers each holding one request, claims cap the rate at *c* / 5 ms (sends, 10 rows per 15 ms call plus a settle, are not the bottleneck).")
	w("")
	w("![throughput against claim concurrency](bench-pipelining.svg)")
	w("")
	w("| concurrency | sweep rows/s | ideal rows/s | of ideal | vs naive |")
	w("| --- | --- | --- | --- | --- |")
	for i, c := range concs {
		w("| %d | %.0f | %.0f | %.0f%% | %.0f× |", c, pipe[i], ideal[i], 100*pipe[i]/ideal[i], pipe[i]/naive.RowsPerS)
	}
	w("")
	w("Naive baseline: %.1f rows/s.", naive.RowsPerS)
	w("")
	w("## Against the moto server")
	w("")
	w("%d rows of %d-byte payloads (item size %d bytes) over four queues, one FIFO, staged with the producer package, then drained by one sweep (default policy: concurrency 16, no wake grace). The naive baseline drains %d rows in the same run. moto handles one request at a time, so the rows/s ratio is a ratio of request counts and latencies, not of what DynamoDB would do. Requests are counted by an SDK middleware on every client; a consumer per queue, on its own uncounted client, empties the queues as they fill (moto scans a FIFO queue's messages for a repeated deduplication id on every send, so a full one would slow the run).", eng.Rows, eng.PayloadSize, eng.ItemSize, nv.Rows)
	w("")
	w("| | Outflow sweep | naive |")
	w("| --- | --- | --- |")
	w("| rows/s | %.0f | %.0f |", eng.Throughput.RowsPerS, nv.Throughput.RowsPerS)
	w("| DynamoDB requests per message | %.3f | %.3f |", ddbAll, perMsg(nv, float64(nv.Dispatch.Total("DynamoDB", false))))
	w("| DynamoDB write requests per message | %.3f | %.3f |", ddbWrites, perMsg(nv, float64(nv.Dispatch.Total("DynamoDB", true))))
	w("| SQS requests per message | %.3f | %.3f |", sqsReq, perMsg(nv, float64(nv.Dispatch.Total("SQS", false))))
	w("| Query requests | %d | %d |", eng.Dispatch.Count("DynamoDB.Query"), nv.Dispatch.Count("DynamoDB.Query"))
	w("")
	w("### Write units per delivered message")
	w("")
	w("Computed from the recorded writes by DynamoDB's rules: each write costs ceil(item size / 1 KB), plus one unit per index write, where an index write happens only when an index key or projected attribute changes (a key change is a delete and a put). Staging is included.")
	w("")
	w("| design | WCU per message |")
	w("| --- | --- |")
	w("| floor: stage 2 + settle 2, sparse index | 4 |")
	w("| **Outflow** (stage 2, claim 1 — no index key moves — done 2) | **%.2f** |", wcu)
	w("| a claim that moves the due-index key (to the lease end) | %.2f |", wcuMoving)
	w("")
	w("The wake sends a fresh unordered row from its stream image without a claim, and settles it with one conditional write (docs/architecture.md, \"The wake's claim-free path\"). A lean row (`Config.Lean`) is staged with no shard, so in no index: its staging and its settle write the table alone. Measured with the wake alone on a live stream, the same staging, claim-free, claimed and lean (settled as done under the default retention, or deleted):")
	w("")
	writeWakePaths(w, wakes)
	w("")
	writeTargets(w, targets)
	writeConsume(w, *consumeMessages, consumeModes)
	logf("cost: refused writes under live traffic, the wake's usage, dollars per message")
	perMillion, err := writeCost(ctx, out, srv.URL, eng, nv, flagCostSizes(), time.Now(), "`make bench`", "the drains of")
	if err != nil {
		return err
	}
	w("## Cost per million messages")
	w("")
	w("Dollars per million messages delivered on each path, from the requests and write units this run measured (staging included) and public on-demand prices in %s read on %s. [cost.md](%s), which this run also writes, has the prices, what each path uses per message, the breakdown per line item, what is assumed and left out, and the refused conditional writes under live traffic (the wake on, K partition sweeps).", bench.PricesRegion, bench.PricesRead, costFile)
	w("")
	w("%s", perMillion)
	writeOrdered(w, eng, ord1, ord5, groupRuns, storeLat, sendLat)
	writeDrains(w, capRep)
	writeMemory(w, mems)
	w("## Lambda")
	w("")
	w("| | sweep | wake |")
	w("| --- | --- | --- |")
	w("| bootstrap, linux/arm64, `-trimpath -ldflags=-s -tags lambda.norpc` | %.1f MB | %.1f MB |", float64(binSizes["sweep"])/1e6, float64(binSizes["wake"])/1e6)
	w("")
	w("Init duration of the sweep bootstrap (host build) under the Runtime Interface Emulator, from its `INIT REPORT`, over %d cold starts: median %.1f ms (min %.1f, max %.1f). Init reads and validates the configuration and builds the AWS clients; it makes no network call.", len(inits), initMed, slices.Min(inits), slices.Max(inits))
	w("")
	w("## Wake latency")
	w("")
	w("Through the local runner (`outflow local`'s machinery: the stream poller every 100 ms, the template's filter, the in-process wake) against moto: %d rows staged one by one, 20 ms apart, each timed from its write to its receipt by a consumer: **p50 %s, p99 %s**. Most of it is the poller's interval and moto's request time; Lambda's event source mapping polls a stream shard about four times a second.", len(lat), p50.Round(time.Millisecond), p99.Round(time.Millisecond))
	w("")
	w("## Where goals are missed")
	w("")
	missed := false
	for _, g := range goals {
		if g[3] != "met" {
			missed = true
			w("- %s: %s against %s. %s", g[0], g[2], g[1], why[g[0]])
		}
	}
	if !missed {
		w("None in this run.")
	}
	if err := os.WriteFile(filepath.Join(out, "benchmarks.md"), []byte(doc.String()), 0o644); err != nil {
		return err
	}
	logf("wrote %s and %s in %s", filepath.Join(out, "benchmarks.md"), plotPath, time.Since(started).Round(time.Second))
	fmt.Print(doc.String())
	return nil
}

// The goals on ordered groups, named once for the why table.
const (
	goalMisordered = "rows of ordered groups sent out of order (fakes and moto)"
	goalHotLinks   = "`Link` reads per row, one hot group (default page size)"
)

// why explains a missed goal: what causes it and what would close it.
var why = map[string]string{
	goalMisordered:             "A row of an ordered group went before its predecessor was settled: a bug in the head check or in parking; the soak and the ordering tests should show which.",
	goalHotLinks:               "A hot group's rows are spread over every shard, so most reach the run before their predecessor; each should park behind that predecessor (held, or pending and still to come) after at most one read (`order.park` in internal/outbox/order.go). More reads per row mean rows were left to wait and read again in a later pass.",
	"SQS requests per message": "A partial batch waits for more rows of its queue at most `BatchLinger` (2 s) while claims are still arriving. Against moto, claims run at a few rows per second per queue, so a batch of 10 takes longer than that to fill and some go out partial; against DynamoDB (about 5 ms a claim, 16 at a time) batches fill in milliseconds. A longer `OUTFLOW_BATCH_LINGER` closes the gap on a slow endpoint, at the cost of rows waiting longer before they are sent.",
	"DynamoDB write requests per delivered message (no faults)": "Only a refused claim (another worker's row) or a failed settle adds writes.",
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// lambdaFigures builds both bootstraps for linux/arm64 (sizes) and the
// sweep for this machine, which it cold-starts seven times under the
// emulator against the endpoint.
func lambdaFigures(ctx context.Context, endpoint string) (map[string]int64, []float64, error) {
	dir, err := os.MkdirTemp("", "outflow-bench")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	sizes := map[string]int64{}
	build := func(goarch, fn, path string) error {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s", "-tags", "lambda.norpc", "-o", path, "./functions/"+fn)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v: %s", fn, err, b)
		}
		return nil
	}
	for _, fn := range []string{"sweep", "wake"} {
		path := filepath.Join(dir, "arm64", fn, "bootstrap")
		if err := build("arm64", fn, path); err != nil {
			return nil, nil, err
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, nil, err
		}
		sizes[fn] = st.Size()
	}
	host := filepath.Join(dir, "host", "sweep", "bootstrap")
	if err := build(goarchHost(), "sweep", host); err != nil {
		return nil, nil, err
	}
	rieBin, err := rie.Path()
	if err != nil {
		return nil, nil, err
	}
	env := []string{"OUTFLOW_TABLE=outflow-bench-missing", "OUTFLOW_ROUTES=q=http://127.0.0.1:1/000000000000/q",
		"AWS_ENDPOINT_URL=" + endpoint, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_LAMBDA_FUNCTION_TIMEOUT=60"}
	var inits []float64
	for range 7 {
		var logs strings.Builder
		emu, err := rie.Start(rieBin, host, env, &syncWriter{b: &logs})
		if err != nil {
			return nil, nil, err
		}
		_, _ = emu.Invoke(ctx, []byte(`{}`))
		emu.Stop()
		m := initReport.FindStringSubmatch(logs.String())
		if m == nil {
			return nil, nil, fmt.Errorf("no INIT REPORT in the emulator's output")
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		inits = append(inits, v)
	}
	return sizes, inits, nil
}

func goarchHost() string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		return "amd64"
	}
	return strings.TrimSpace(string(out))
}

// wakeLatency stages n rows through the local runner and times each from
// its write to its receipt.
func wakeLatency(ctx context.Context, n int) ([]time.Duration, error) {
	type mark struct{ staged, received time.Time }
	marks := map[string]*mark{}
	var mu sync.Mutex
	got := make(chan struct{}, n)
	r, err := local.Start(ctx, local.Options{
		Template: "template.yaml",
		OnMessage: func(_ string, m sqstypes.Message, at time.Time) {
			key := aws.ToString(m.MessageAttributes[delivery.AttrKey].StringValue)
			mu.Lock()
			if mk := marks[key]; mk != nil && mk.received.IsZero() {
				mk.received = at
				got <- struct{}{}
			}
			mu.Unlock()
		},
		OnWake: func(events.DynamoDBEvent) {},
	})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = r.Run(runCtx) }()
	p, err := outflow.NewProducer(dynamodb.NewFromConfig(r.AWS), outflow.Config{Table: r.Stack.Table, Ordered: []string{}})
	if err != nil {
		return nil, err
	}
	for i := range n {
		key := fmt.Sprintf("lat-%04d", i)
		mu.Lock()
		marks[key] = &mark{staged: time.Now()}
		mu.Unlock()
		if _, err := p.Put(ctx, outflow.Row{Key: key, Queue: "orders", Payload: []byte(`{"t":1}`)}); err != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	timeout := time.After(2 * time.Minute)
	for range n {
		select {
		case <-got:
		case <-timeout:
			return nil, fmt.Errorf("not every row arrived")
		}
	}
	var lat []time.Duration
	for _, m := range marks {
		lat = append(lat, m.received.Sub(m.staged))
	}
	return lat, nil
}
