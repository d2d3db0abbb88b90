package main

import (
	"fmt"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/outbox"
)

// groupCase is one throughput case for ordered groups and its unordered
// baseline: the same rows in the same groups, swept side by side.
type groupCase struct {
	name                 string
	rows, size, pageSize int
	ordered, unordered   bench.GroupRun
}

// groupConcurrency is the claim concurrency of the group cases: the
// policy's default.
var groupConcurrency = outbox.DefaultPolicy().Concurrency

// groupThroughput sweeps one hot group of hot rows and groups groups of 5
// rows under the latency fakes, each ordered and then unordered, at the
// default page size; then the hot group with pages of 1000, and with a
// half and a quarter of its rows, to show how the head checks grow with
// the group.
func groupThroughput(hot, groups int, storeLat, sendLat time.Duration) ([]groupCase, error) {
	page := outbox.DefaultPolicy().PageSize
	cases := []groupCase{
		{name: "one hot group", rows: hot, size: hot, pageSize: page},
		{name: fmt.Sprintf("%d groups of 5", groups), rows: 5 * groups, size: 5, pageSize: page},
		{name: "one hot group, a quarter of the rows", rows: hot / 4, size: hot / 4, pageSize: page},
		{name: "one hot group, half the rows", rows: hot / 2, size: hot / 2, pageSize: page},
		{name: "one hot group, pages of 1000", rows: hot, size: hot, pageSize: 1000},
	}
	for i := range cases {
		c := &cases[i]
		logf("ordered groups: %s (%d rows, pages of %d)", c.name, c.rows, c.pageSize)
		var err error
		if c.unordered, err = bench.GroupSweep(c.rows, c.size, false, groupConcurrency, c.pageSize, storeLat, sendLat); err != nil {
			return nil, err
		}
		if c.ordered, err = bench.GroupSweep(c.rows, c.size, true, groupConcurrency, c.pageSize, storeLat, sendLat); err != nil {
			return nil, err
		}
	}
	return cases, nil
}

// perMessage returns the requests of the named operations, per row the
// result drained.
func perMessage(r *bench.Requests, rows int, ops ...string) float64 {
	n := 0
	for _, op := range ops {
		n += r.Count(op)
	}
	return float64(n) / float64(rows)
}

// writeOrdered writes the section on ordered groups: requests and write
// units per message against moto (eng is the unordered sweep, ord1 and
// ord5 the ordered drains in groups of 1 and 5), and the throughput cases.
func writeOrdered(w func(string, ...any), eng, ord1, ord5 bench.MotoResult, cases []groupCase, storeLat, sendLat time.Duration) {
	w("## Ordered groups")
	w("")
	w("A route listed in `OUTFLOW_ORDERED` (and in the producer's `Config.Ordered`) delivers each FIFO group's rows in staging order: the producer chains them with a consistent read of the group's tail and a two-item transaction, and the engine claims a row only once its predecessor is settled, checked with `Store.Link` (a consistent `GetItem` of eight attributes) unless the run holds the predecessor, or will be given it, and the row parks behind it; the due index projects each row's `prev` and `seq`, so the row itself is never read (docs/architecture.md, \"Ordered groups\").")
	w("")
	w("### Requests and write units per ordered message (moto)")
	w("")
	w("%d rows of %d-byte payloads, all on one FIFO route listed as ordered (dead heads block), in groups of 1 (every row heads its group) and in groups of 5 consecutive rows, staged with the producer (`Put`: per group one row after another, groups in parallel), then drained by one sweep with the default policy, counted as above. The unordered column is the sweep of the previous section. Staging and delivery are counted on separate clients; a consumer checks each group's first arrivals against staging order.", ord1.Rows, ord1.PayloadSize)
	w("")
	stageReqs := func(r bench.MotoResult) float64 {
		return perMessage(r.Stage, r.Rows, "DynamoDB.PutItem", "DynamoDB.GetItem", "DynamoDB.TransactWriteItems")
	}
	wcu := func(r *bench.Requests, rows int) float64 { return r.WCU(bench.IndexWrites) / float64(rows) }
	ddb := func(r bench.MotoResult) float64 {
		return float64(r.Dispatch.Total("DynamoDB", false)) / float64(r.Rows)
	}
	sqsReqs := func(r bench.MotoResult) float64 { return float64(r.Dispatch.Total("SQS", false)) / float64(r.Rows) }
	rs := []bench.MotoResult{eng, ord1, ord5}
	row := func(name, format string, f func(bench.MotoResult) float64) {
		line := "| " + name
		for _, r := range rs {
			line += " | " + fmt.Sprintf(format, f(r))
		}
		w("%s |", line)
	}
	w("| per message | unordered | ordered, groups of 1 | ordered, groups of 5 |")
	w("| --- | --- | --- | --- |")
	row("staging: DynamoDB requests", "%.3f", stageReqs)
	row("— of which consistent reads of the group's tail (`GetItem`)", "%.3f", func(r bench.MotoResult) float64 { return perMessage(r.Stage, r.Rows, "DynamoDB.GetItem") })
	row("— of which `TransactWriteItems` (row and group item)", "%.3f", func(r bench.MotoResult) float64 {
		return perMessage(r.Stage, r.Rows, "DynamoDB.TransactWriteItems")
	})
	row("staging: WCU", "%.2f", func(r bench.MotoResult) float64 { return wcu(r.Stage, r.Rows) })
	row("delivery: DynamoDB requests", "%.3f", ddb)
	row("— of which due-index queries", "%.3f", func(r bench.MotoResult) float64 { return perMessage(r.Dispatch, r.Rows, "DynamoDB.Query") })
	row("— of which head checks (`Link`, consistent `GetItem`)", "%.3f", func(r bench.MotoResult) float64 { return perMessage(r.Dispatch, r.Rows, "DynamoDB.GetItem") })
	row("— of which writes (claim, done)", "%.3f", func(r bench.MotoResult) float64 { return float64(r.Dispatch.Total("DynamoDB", true)) / float64(r.Rows) })
	row("delivery: SQS requests", "%.3f", sqsReqs)
	row("delivery: WCU", "%.2f", func(r bench.MotoResult) float64 { return wcu(r.Dispatch, r.Rows) })
	row("**WCU, staging and delivery**", "**%.2f**", func(r bench.MotoResult) float64 { return wcu(r.Stage, r.Rows) + wcu(r.Dispatch, r.Rows) })
	row("consistent reads (1 RCU each: items under 4 KB)", "%.3f", func(r bench.MotoResult) float64 {
		return perMessage(r.Stage, r.Rows, "DynamoDB.GetItem") + perMessage(r.Dispatch, r.Rows, "DynamoDB.GetItem")
	})
	w("| rows/s against moto | %.0f | %.0f | %.0f |", eng.Throughput.RowsPerS, ord1.Throughput.RowsPerS, ord5.Throughput.RowsPerS)
	w("| rows whose first arrival broke their group's order | — | %d | %d |", ord1.OutOfOrder, ord5.OutOfOrder)
	w("")
	w("Write units follow the rule above, with one addition: a write inside `TransactWriteItems` costs twice a standard write's table units (DynamoDB prepares and commits each item), while the due-index write it causes costs one unit, as DynamoDB propagates a transaction's changes to global secondary indexes after it commits. So staging an ordered row (item under 1 KB) is the row's put 2 + its index write 1 + the group item's update 2 (the group item is in no index) = 5, against 2 for an unordered row; claim (1) and done (2) are the same writes as for any row. Had the index write been billed twice too, staging would be 6. Reads are not write units: each staged ordered row also costs one consistent read of its group's tail, and each delivered one, unless it parked behind a predecessor the same run held, a consistent read of its predecessor (the due index projects `prev` and `seq`, so the row itself is not read). A row that heads its group (groups of 1) has no predecessor to read.")
	w("")
	w("### Throughput under the latency fakes (%s per DynamoDB call, %s per SQS call)", storeLat, sendLat)
	w("")
	serial := 1 / (2*storeLat + sendLat).Seconds()
	w("One sweep (concurrency %d, no wake grace), on the synthetic store and sink of the pipelining section, with all rows on one FIFO route in groups of consecutive rows spread over four shards, as key hashing spreads them. Each ordered run follows its unordered baseline, the same rows with their groups but no chain and the route not listed, in the same process; the ratio is the project's measure. The synthetic store chains each group as the producer does (`seq`, `prev`) and answers `Link`; the sink checks every group's order. One group can never go faster than one row in flight: claim, send and settle, %.0f rows/s with these latencies.", groupConcurrency, serial)
	w("")
	w("| case | rows | groups | page size | unordered rows/s | ordered rows/s | ordered ÷ unordered | `Link` reads per row | due-index queries, unordered / ordered |")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	outOfOrder := int64(0)
	for _, c := range cases {
		w("| %s | %d | %d | %d | %.0f | %.1f | %.3f | %.2f | %d / %d |", c.name, c.rows, c.ordered.Groups, c.pageSize, c.unordered.RowsPerS, c.ordered.RowsPerS,
			c.ordered.RowsPerS/c.unordered.RowsPerS, c.ordered.PerRow("Link"), c.unordered.Calls["QueryDue"], c.ordered.Calls["QueryDue"])
		outOfOrder += c.ordered.OutOfOrder
	}
	w("")
	hot, quarter, half, hot1000 := cases[0], cases[2], cases[3], cases[4]
	links := func(c groupCase) float64 { return c.ordered.PerRow("Link") }
	w("The sink received %d rows out of their group's order. One hot group reached %.0f%% of the one-row-in-flight bound with pages of %d, %.0f%% with pages of 1000.",
		outOfOrder, 100*hot.ordered.RowsPerS/serial, hot.pageSize, 100*hot1000.ordered.RowsPerS/serial)
	w("")
	if links(hot) > 2 && links(hot) > 1.5*links(quarter) {
		w("With pages of %d, `Link` reads per row grow with the group's length: %.2f at %d rows, %.2f at %d, %.2f at %d, while the same %d rows with pages of 1000 cost %.2f. Each sweep pass delivers only the start of the chain, up to the first row checked before its predecessor's shard handed that predecessor over; every later pass queries the due index again (%d queries against %d unordered) and reads the predecessor of every row left. \"Where goals are missed\" below gives the cause in the engine and a fix.",
			hot.pageSize, links(quarter), quarter.rows, links(half), half.rows, links(hot), hot.rows, hot1000.rows, links(hot1000), hot.ordered.Calls["QueryDue"], hot.unordered.Calls["QueryDue"])
	} else {
		w("`Link` reads per row stay below one at every length measured: %.2f at %d rows, %.2f at %d, %.2f at %d (pages of %d), %.2f with pages of 1000.",
			links(quarter), quarter.rows, links(half), half.rows, links(hot), hot.rows, hot.pageSize, links(hot1000))
	}
	w("")
	w("Many small groups go in rounds, one per place in the group: the first pass claims every group's head and parks the rows behind them, and each later round is a pipeline pass over the rows whose predecessors the last one delivered, which drains before the next begins. Their ordered rate is %.0f%% of the unordered one, at %.2f `Link` reads per row.",
		100*cases[1].ordered.RowsPerS/cases[1].unordered.RowsPerS, links(cases[1]))
	w("")
}
