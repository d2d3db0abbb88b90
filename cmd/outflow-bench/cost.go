package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/moto"
)

// costFile is the generated file of the cost and quiet-by-default parts,
// which benchmarks.md links to: `-only cost` regenerates it alone, without
// the whole bench.
const costFile = "cost.md"

// lambdaMemoryMB is the template's default SweepMemoryMB and WakeMemoryMB.
const lambdaMemoryMB = 256

// The cost part's flags, here rather than in main so the parts stay apart,
// and -only, which names any part.
var (
	only      = flag.String("only", "", "run one part alone: targets (requests per message to SQS, SNS and EventBridge, spliced into docs/benchmarks.md), capacity (the capacity model, written to docs/capacity.md), operators (stats, dead list, redrive and purge at many dead letters, written to docs/capacity-operators.md, which capacity.md includes), memory (peak heap over backlogs of 10k, 100k and 1M rows, spliced into docs/benchmarks.md), cost (refused writes and cost per message, written to docs/cost.md), quiet (refused writes only, printed), backstop (the lean backstop's pass over a table of tombstones, at -backstop-payload and -backstop-items, printed) or wakepath (write units per wake-delivered message, claim-free, claimed and lean, printed)")
	quietRows = flag.Int("quiet-rows", 600, "rows staged in each refused-writes run")
	wakeRows  = flag.Int("wake-rows", 600, "rows the wake alone delivers for the cost model")
	stageFor  = flag.Duration("stage-for", 60*time.Second, "how long producers stage in the refused-writes and wake runs")
	delayed   = flag.Float64("quiet-delayed", 0.3, "share of the unordered rows staged with a NotBefore in the refused-writes runs")
)

// flagCostSizes are the cost part's sizes from the flags.
func flagCostSizes() costSizes {
	return costSizes{quietRows: *quietRows, wakeRows: *wakeRows, stageFor: *stageFor, delayed: *delayed}
}

// runOnly runs one part alone: "cost" or "quiet".
func runOnly(part, out string, n sizes) error {
	switch part {
	case "cost":
		return runCostOnly(out, n, flagCostSizes())
	case "quiet":
		return runQuietOnly(flagCostSizes())
	case "consume":
		return runConsumeOnly(out, *consumeMessages)
	case "wakepath":
		return runWakePathOnly(wakePathRows)
	}
	return fmt.Errorf("-only %q: the parts are cost, quiet, consume and wakepath", part)
}

// costSizes are the row counts of the cost part's own runs.
type costSizes struct {
	quietRows, wakeRows int
	stageFor            time.Duration
	// delayed is the share of unordered rows staged with a NotBefore.
	delayed float64
}

// runCostOnly runs the cost part alone: its own drains (sweep and naive)
// against a new moto server, then writeCost.
func runCostOnly(out string, n sizes, c costSizes) error {
	ctx := context.Background()
	started := time.Now()
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	logf("moto: draining %d rows with the engine", n.moto)
	eng, err := bench.DrainOnEndpoint(ctx, srv.URL, n.moto, bench.PayloadBytes, false)
	if err != nil {
		return err
	}
	logf("moto: draining %d rows one at a time", n.naive)
	nv, err := bench.DrainOnEndpoint(ctx, srv.URL, n.naive, bench.PayloadBytes, true)
	if err != nil {
		return err
	}
	how := "`go run ./cmd/outflow-bench " + strings.Join(os.Args[1:], " ") + "`"
	_, err = writeCost(ctx, out, srv.URL, eng, nv, c, started, how, "drains made for this file, as in")
	return err
}

// writeCost measures the quiet-by-default runs and the wake path, prices
// every path and writes cost.md. sweep and naive are drains already made
// against endpoint.
func writeCost(ctx context.Context, out, endpoint string, sweep, naive bench.MotoResult, c costSizes, started time.Time, how, drains string) (summary string, err error) {
	quiet, err := quietRuns(ctx, endpoint, c)
	if err != nil {
		return "", err
	}
	logf("cost: the wake alone, %d rows over %s", c.wakeRows, c.stageFor)
	wake, err := bench.RunStream(ctx, endpoint, bench.StreamConfig{
		Rows: c.wakeRows, Stage: c.stageFor, Producers: 4, Shards: 8, Poll: 250 * time.Millisecond, BatchSize: 100,
		Timeout: c.stageFor + 3*time.Minute,
	})
	if err != nil {
		return "", fmt.Errorf("wake run: %w", err)
	}
	lean, err := leanRuns(ctx, endpoint, c)
	if err != nil {
		return "", err
	}
	logf("cost: Lambda durations under the latency fakes")
	storeLat, sendLat := 5*time.Millisecond, 15*time.Millisecond
	pipe := bench.PipelinedSweep(2000, 16, storeLat, sendLat)
	nvFake := bench.NaiveSweep(100, storeLat, sendLat)
	// The wake's invocations are timed at the run's own batch size: a
	// small batch pays a whole claim, send and settle for few rows.
	wakeBatch, wakeFake, err := timeWakeBatches(wake, storeLat, sendLat)
	if err != nil {
		return "", err
	}
	leanBatch, leanFake, err := timeWakeBatches(lean.chosen().res, storeLat, sendLat)
	if err != nil {
		return "", err
	}
	getRecords := float64(wake.Stream.Count("DynamoDB Streams.GetRecords"))
	getRecordsPerRow := getRecords / float64(max(wake.WakeDelivered, 1))
	usages := []bench.Usage{
		bench.WakeUsage(wake, lambdaMemoryMB, perRow(wakeFake)),
		bench.LeanUsage(lean.chosen().res, lambdaMemoryMB, perRow(leanFake)),
		bench.DrainUsage("Outflow, sweep", sweep, 100, lambdaMemoryMB, perRow(pipe)),
		bench.PipesUsage(sweep, getRecordsPerRow),
		bench.DrainUsage("naive one-at-a-time loop", naive, 100, lambdaMemoryMB, perRow(nvFake)),
	}
	leanRun := lean.chosen().res
	leanGetRecords := float64(leanRun.Stream.Count("DynamoDB Streams.GetRecords"))

	var doc strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&doc, format+"\n", args...) }
	w("# Refused writes and cost per message")
	w("")
	w("Generated by %s on %s, in %s, on a 2-core machine, against the moto server. Every figure comes from that run, except the prices, which are a table in the code (`internal/bench/prices.go`); rerun to refresh. [Benchmarks](benchmarks.md) has the rest.", how, time.Now().UTC().Format("2006-01-02"), time.Since(started).Round(time.Second))
	w("")
	writeQuiet(w, quiet)
	w("## Cost per million messages, in dollars")
	w("")
	w("### Prices")
	w("")
	w("Public on-demand prices in %s, read on %s from the pages each line names (AWS's pricing pages and documentation). Free tiers are left out.", bench.PricesRegion, bench.PricesRead)
	w("")
	w("| item | price | per | note | source |")
	w("| --- | --- | --- | --- | --- |")
	for _, p := range bench.Prices {
		w("| %s | $%g | %s %s | %s | %s |", p.Item, p.Dollar, perText(p.Per), p.Unit, p.Note, sources(p.Source))
	}
	w("")
	w("### What each path uses per message")
	w("")
	w("Staging is included in every path. Measured against moto: the sweep drained %d rows and the naive loop %d (%s [Benchmarks](benchmarks.md)'s moto section, %d-byte items); the wake delivered %d rows staged by 4 producers over %s with no sweep running, its stream polled every 250 ms (%d GetRecords calls, %.1f records each, %d wake invocations of %.1f rows each). Write units follow the rule in [Benchmarks](benchmarks.md) (\"Write units per delivered message\"), split between the table and the due index. A due-index query is charged %.1f read units, an upper bound (a full page of 100 entries, each as large as the row, eventually consistent). Lambda duration is the function's time per row under the latency fakes (5 ms per DynamoDB call, 15 ms per SQS call, closer to AWS than moto's): %.2f ms per row for a sweep at concurrency 16, %.2f ms for a wake invocation of %d records (the run's average, timed over 20 invocations), %.1f ms for the naive loop, times %d MB (the template's default memory).",
		sweep.Throughput.Rows, naive.Throughput.Rows, drains, sweep.ItemSize, wake.WakeDelivered, c.stageFor, int(getRecords), float64(wake.Records)/max(getRecords, 1), wake.WakeRuns, float64(wake.WakeDelivered)/float64(max(wake.WakeRuns, 1)),
		bench.QueryRRU(100, sweep.ItemSize), 1000*perRow(pipe), 1000*perRow(wakeFake), wakeBatch, 1000*perRow(nvFake), lambdaMemoryMB)
	w("")
	w("The lean path is the wake's run again, on a table of its own, with the producers staging lean (`Config.Lean`: each unordered row due at once goes in with no shard, so in no index) and each row settled by %s (%s, the cheaper settle: [below](#lean-the-backstop-and-the-settle)): %d rows delivered, %d GetRecords calls, %.1f records each, %d wake invocations of %.1f rows each, timed as the wake's at %d records (%.2f ms per row). Its write units are counted from the recorded writes by the same rule, a row with no shard having no due-index entry to write or delete.",
		lean.chosen().how, lean.chosen().retention, leanRun.WakeDelivered, int(leanGetRecords), float64(leanRun.Records)/max(leanGetRecords, 1), leanRun.WakeRuns,
		float64(leanRun.WakeDelivered)/float64(max(leanRun.WakeRuns, 1)), leanBatch, 1000*perRow(leanFake))
	w("")
	w("| per message | %s |", names(usages))
	w("| --- |%s", strings.Repeat(" --- |", len(usages)))
	row := func(label string, f func(bench.Usage) float64, format string) {
		cells := make([]string, len(usages))
		for i, u := range usages {
			cells[i] = fmt.Sprintf(format, f(u))
		}
		w("| %s | %s |", label, strings.Join(cells, " | "))
	}
	row("DynamoDB requests (staging included)", func(u bench.Usage) float64 { return u.DynamoDBRequests }, "%.3f")
	row("stream GetRecords calls", func(u bench.Usage) float64 { return u.GetRecords }, "%.4f")
	row("write units, table", func(u bench.Usage) float64 { return u.TableWRU }, "%.2f")
	row("write units, due index", func(u bench.Usage) float64 { return u.IndexWRU }, "%.2f")
	row("read units", func(u bench.Usage) float64 { return u.RRU }, "%.3f")
	row("charged stream reads (GetRecords)", func(u bench.Usage) float64 { return u.StreamReads }, "%.4f")
	row("SQS requests", func(u bench.Usage) float64 { return u.SQSRequests }, "%.3f")
	row("Lambda invocations", func(u bench.Usage) float64 { return u.LambdaInvocations }, "%.4f")
	row("Lambda GB-seconds", func(u bench.Usage) float64 { return u.LambdaGBs }, "%.6f")
	row("Scheduler invocations", func(u bench.Usage) float64 { return u.SchedulerInvocations }, "%.4f")
	row("Pipes requests", func(u bench.Usage) float64 { return u.PipesRequests }, "%.0f")
	w("")
	w("### Dollars per million messages")
	w("")
	w("| line item | %s |", names(usages))
	w("| --- |%s", strings.Repeat(" --- |", len(usages)))
	bills := make([][]bench.LineItem, len(usages))
	for i, u := range usages {
		bills[i] = u.PerMillion()
	}
	for j, name := range bench.LineNames {
		cells := make([]string, len(usages))
		billed := false
		for i := range usages {
			cells[i] = dollars(bills[i][j].Dollars)
			billed = billed || bills[i][j].Dollars != 0
		}
		if billed {
			w("| %s | %s |", name, strings.Join(cells, " | "))
		}
	}
	totals := make([]string, len(usages))
	for i := range usages {
		totals[i] = "**" + dollars(bench.Total(bills[i])) + "**"
	}
	w("| **total** | %s |", strings.Join(totals, " | "))
	summary = fmt.Sprintf("| | %s |\n| --- |%s\n| dollars per million messages | %s |\n", names(usages), strings.Repeat(" --- |", len(usages)), strings.Join(totals, " | "))
	w("")
	w("Assumptions:")
	w("")
	w("- **Outflow, wake**: rows staged by the producer, delivered by the wake from the stream: claim, send (batched per queue), done. Lambda's event source mapping reads the stream, and AWS does not charge GetRecords made by a Lambda trigger, so the stream costs nothing; the mapping's filter drops the claim's and done's stream records before any invocation. Invocations per message depend on traffic: the run's batches held %.1f rows; at one row per invocation the Lambda request line would be $%.2f.", float64(wake.WakeDelivered)/float64(max(wake.WakeRuns, 1)), bench.PriceLambdaRequest.Each()*1e6)
	w("- **Outflow, lean**: the same delivery with rows staged lean: staging writes the row alone (no due-index entry), and the wake's one settle (%s) touches no index, so a message costs %.2f write units against the wake's %.2f. The backstop, a scan of the table each scheduled sweep for lean rows the stream never delivered, costs by the hour, not by the message: [below](#lean-the-backstop-and-the-settle).", lean.chosen().how, usages[1].TableWRU+usages[1].IndexWRU, usages[0].TableWRU+usages[0].IndexWRU)
	w("- **Outflow, sweep**: the same rows delivered by a scheduled sweep: one Scheduler invocation and one Lambda invocation per sweep, here spread over the drain's %d rows; a sweep that finds nothing still runs (below).", sweep.Throughput.Rows)
	w("- **EventBridge Pipes relay**: the same staging writes (row and due-index entry, so the lines compare; a relay needs no due index and would save its write unit), the table's stream read by the pipe, one Pipes request and one SQS `SendMessage` per message (the pipe's SQS target sends each event on its own), and no done write: a relay does not settle rows, which are left to expire by TTL (TTL deletes are free, and the pipe's filter drops their stream records). Pipes is not a Lambda trigger, so its GetRecords calls are charged: taken at this run's %.4f per message (%.1f records per call); at low traffic a poller's empty calls dominate (below). No retries, dead letters or ordering are modelled.", getRecordsPerRow, float64(wake.Records)/max(getRecords, 1))
	w("- **naive loop**: the same scheduled function running the naive dispatcher (query, then claim, send and settle one row at a time): one `SendMessage` per message.")
	w("- SQS requests are priced as standard queues; on FIFO queues every SQS line is 25%% higher ($%.2f per million requests against $%.2f). Every message here is under 64 KB, so a request is one billed chunk.", bench.PriceSQSFIFO.Each()*1e6, bench.PriceSQSStandard.Each()*1e6)
	w("")
	writeTargetDollars(w, usages)
	writeStaging(w, usages, sweep.ItemSize)
	if err := writeLean(w, usages, lean, c.stageFor); err != nil {
		return "", err
	}
	w("Excluded: storage (table, index, stream retention; the lean section prices a tombstone's), the lean backstop (priced by the hour in its section), data transfer, free tiers, CloudWatch (logs, metrics, alarms), KMS requests, the consumers' own receives and deletes (the same for every path), cold-start (init) duration, and retries or faults. Costs that do not grow with messages are left out of the table: the sweep's schedule fires every minute whether or not there is work, %d invocations a month: $%.3f of Scheduler and $%.3f of Lambda requests per partition, plus its due-index queries (at least one per shard); a Pipes poller reading an idle stream shard about four times a second, as Lambda's mapping does (an assumption: the rate is not published), would make about 10.4 million charged GetRecords a month per shard, $%.2f.",
		minutesPerMonth, minutesPerMonth*bench.PriceScheduler.Each(), minutesPerMonth*bench.PriceLambdaRequest.Each(), 4*secondsPerMonth*bench.PriceStreamRead.Each())
	w("")
	path := filepath.Join(out, costFile)
	if err := os.WriteFile(path, []byte(doc.String()), 0o644); err != nil {
		return "", err
	}
	logf("wrote %s", path)
	fmt.Print(doc.String())
	return summary, nil
}

// writeTargetDollars prices every path for each kind of target.
func writeTargetDollars(w func(string, ...any), usages []bench.Usage) {
	w("### Dollars per million messages, by target")
	w("")
	w("The same paths delivering to each kind of target Outflow routes to. Outflow sends up to 10 rows a request to every target, so its send requests per message are the ones measured above against SQS ([Benchmarks](benchmarks.md), \"Requests per message by target\", counts the same requests per message for `SendMessageBatch`, `PublishBatch` and `PutEvents`); a relay or the naive loop sends one message a request. What differs is how the target bills them (Prices): SQS and SNS per request, per 64 KB chunk of it; EventBridge per event, each `PutEvents` entry, per 64 KB chunk. Every message here is under 64 KB. Each cell is the total, and in brackets the target's own line.")
	w("")
	w("| target | %s |", names(usages))
	w("| --- |%s", strings.Repeat(" --- |", len(usages)))
	for _, t := range bench.Targets {
		cells := make([]string, len(usages))
		for i, u := range usages {
			bill := u.To(t).PerMillion()
			cells[i] = fmt.Sprintf("%s (%s)", dollars(bench.Total(bill)), dollars(targetLine(bill)))
		}
		w("| %s | %s |", t, strings.Join(cells, " | "))
	}
	w("")
	wake := usages[0]
	w("- **SNS**: AWS's SNS guide says batching cuts publishing costs \"by a factor of up to 10\": a `PublishBatch` is billed per 64 KB chunk of the request's data, not per message, so Outflow's batches cost what they cost on SQS at $%.2f instead of $%.2f a million requests. Were each message of a batch billed as a request, the SNS line would be $%.2f on every path (the relay's), and Outflow's wake would total %s. Deliveries from a topic to its SQS subscriptions are free; a FIFO topic is priced otherwise (per request and per GB of payload) and is not in this table.",
		bench.PriceSNS.Each()*1e6, bench.PriceSQSStandard.Each()*1e6, bench.PriceSNS.Each()*1e6, dollars(bench.Total(wake.To(bench.TargetSNS).PerMillion())-targetLine(wake.To(bench.TargetSNS).PerMillion())+bench.PriceSNS.Each()*1e6))
	w("- **EventBridge**: batching saves nothing: every entry is an event, $%.2f a million, whichever path sends it, so on a bus Outflow's batching wins only requests, not dollars. Delivery from the bus to a rule's targets is included.", bench.PriceEventBridgeEvent.Each()*1e6)
	w("")
}

// perRow is a timed run's seconds per row.
func perRow(t bench.Throughput) float64 { return t.Elapsed.Seconds() / float64(max(t.Rows, 1)) }

// timeWakeBatches times 20 wake invocations of r's mean batch under the
// latency fakes, and returns that batch size and the timing.
func timeWakeBatches(r bench.StreamResult, storeLat, sendLat time.Duration) (int, bench.Throughput, error) {
	batch := max(1, int(math.Round(float64(r.WakeDelivered)/float64(max(r.WakeRuns, 1)))))
	var fake bench.Throughput
	for range 20 {
		t, err := bench.WakeBatch(batch, storeLat, sendLat)
		if err != nil {
			return 0, fake, err
		}
		fake.Rows += t.Rows
		fake.Elapsed += t.Elapsed
	}
	return batch, fake, nil
}

// targetLine is what a bill pays its target: SQS, SNS or EventBridge.
func targetLine(bill []bench.LineItem) float64 {
	t := 0.0
	for _, l := range bill {
		switch l.Name {
		case "SQS requests", "SNS requests", "EventBridge events":
			t += l.Dollars
		}
	}
	return t
}

// writeStaging prices staging in the application's transaction, and
// ordered rows by item size.
func writeStaging(w func(string, ...any), usages []bench.Usage, itemSize int) {
	w("### Staging in the business transaction")
	w("")
	w("An application stages a row either in its own transaction with the business write (`TransactItem`, `Producer.Transact`), which is the outbox's point, or by a `PutItem` of its own (`Put`). A put inside `TransactWriteItems` costs twice the write units of a plain put (DynamoDB prepares and commits each item: %s); the due-index write that follows the commit costs one, as for a plain put. The lines above stage with `Put`. Per million messages to an SQS standard queue:", sources("https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html"))
	w("")
	w("| path | write units, `Put` | write units, `TransactItem` | dollars, `Put` | dollars, `TransactItem` |")
	w("| --- | --- | --- | --- | --- |")
	for _, u := range usages {
		if u.Name == "naive one-at-a-time loop" {
			continue
		}
		tx := u.InTransaction()
		w("| %s | %.2f | %.2f | %s | %s |", u.Name, u.TableWRU+u.IndexWRU, tx.TableWRU+tx.IndexWRU, dollars(bench.Total(u.PerMillion())), dollars(bench.Total(tx.PerMillion())))
	}
	w("")
	w("The doubling costs every path the same: the row's put, %.2f write units at this size, $%.2f a million.", usages[0].StageTableWRU, usages[0].StageTableWRU*bench.PriceWRU.Each()*1e6)
	w("")
	w("### Ordered rows, by item size")
	w("")
	w("An ordered row is staged in a transaction with its group's tail item, with `Put` and `TransactItem` alike: its put costs twice its units, and the group item's update 2 more (the group item is under 1 KB and in no index); its claim and done are any row's. By the rule of [Benchmarks](benchmarks.md) (\"Write units per delivered message\", which measured 5.00 and 8.00 at %d-byte items, the first line), table and index write units per message, and DynamoDB's write dollars per million:", itemSize)
	w("")
	w("| item size | unordered, `Put` | unordered, `TransactItem` | ordered | ordered ÷ unordered `Put` | ordered − unordered `TransactItem` | dollars, unordered `Put` / ordered |")
	w("| --- | --- | --- | --- | --- | --- | --- |")
	for _, b := range []int{itemSize, 1000, 2000, 4000, 16000, 64000, 256000} {
		put := wru(bench.WriteUnitsBySize(b, false, false))
		tx := wru(bench.WriteUnitsBySize(b, false, true))
		ord := wru(bench.WriteUnitsBySize(b, true, false))
		w("| %s bytes | %s | %s | %s | %.2f× | %s | %s / %s |", num(b), numf(put), numf(tx), numf(ord), ord/put, numf(ord-tx), dollars(put*bench.PriceWRU.Each()*1e6), dollars(ord*bench.PriceWRU.Each()*1e6))
	}
	w("")
	w("So the 8-against-5 of a small row grows with the item by its doubled put: ordered costs 2 + ceil(size / 1 KB) units more than unordered with `Put`, and tends to 4/3 of it as the item grows. Against a row staged with `TransactItem`, whose put is doubled already, an ordered row costs the group item's 2 units more at any size.")
	w("")
}

// wru is a split of write units, summed.
func wru(table, index float64) float64 { return table + index }

// sources writes a price's source pages as links.
func sources(s string) string {
	parts := strings.Split(s, " and ")
	for i, p := range parts {
		parts[i] = "<" + p + ">"
	}
	return strings.Join(parts, ", ")
}

// A 30-day month.
const (
	minutesPerMonth = 30 * 24 * 60
	secondsPerMonth = minutesPerMonth * 60
)

func names(us []bench.Usage) string {
	n := make([]string, len(us))
	for i, u := range us {
		n[i] = u.Name
	}
	return strings.Join(n, " | ")
}

func dollars(d float64) string {
	if d == 0 {
		return "—"
	}
	if d < 0.01 {
		return fmt.Sprintf("$%.4f", d)
	}
	return fmt.Sprintf("$%.2f", d)
}

func perText(n float64) string {
	switch n {
	case 1:
		return "1"
	case 1e5:
		return "100,000"
	case 1e6:
		return "1,000,000"
	}
	return fmt.Sprintf("%g", n)
}
