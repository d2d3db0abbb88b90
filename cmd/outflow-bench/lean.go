package main

import (
	"context"
	"fmt"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// The lean backstop's measured table: rows of the bench's size, a few of
// them missed (left pending with no shard) among tombstones.
const (
	backstopItems  = 10_000
	backstopMissed = 3
)

// leanRate is the message rate, per second, at which the lean settles are
// compared: a day of tombstones at it is 864,000 items.
const leanRate = 10.0

// sweepPeriod is the template's sweep schedule.
const sweepPeriod = time.Minute

// leanSettle is one lean run: the wake alone delivering lean rows, settled
// as done (a tombstone, the default retention) or by a delete.
type leanSettle struct {
	name, how, retention string
	res                  bench.StreamResult
}

// leanPath is the lean path's measurements: both settles, and the
// backstop's pass over a table built for it.
type leanPath struct {
	settles  []leanSettle
	backstop bench.BackstopMeasure
	// pick indexes the settle the comparison found cheaper, which the
	// lean column uses.
	pick int
}

func (l leanPath) chosen() leanSettle { return l.settles[l.pick] }

// leanRuns runs the lean path twice, as the wake's run but with the
// producers staging lean, keeping delivered rows as done and deleting
// them, measures the backstop, and picks the cheaper settle.
func leanRuns(ctx context.Context, endpoint string, c costSizes) (leanPath, error) {
	var l leanPath
	for _, s := range []struct {
		leanSettle
		del bool
	}{
		{leanSettle{name: "tombstone", how: "an `UpdateItem` to done, kept until its TTL", retention: "`OUTFLOW_DONE_RETENTION` 24h, the default"}, false},
		{leanSettle{name: "delete", how: "a `DeleteItem`", retention: "`OUTFLOW_DONE_RETENTION=0`"}, true},
	} {
		logf("cost: the wake alone, lean rows settled by a %s, %d rows over %s", s.name, c.wakeRows, c.stageFor)
		res, err := bench.RunStream(ctx, endpoint, bench.StreamConfig{
			Rows: c.wakeRows, Stage: c.stageFor, Producers: 4, Shards: 8, Poll: 250 * time.Millisecond, BatchSize: 100,
			Lean: true, DeleteDone: s.del, Timeout: c.stageFor + 3*time.Minute,
		})
		if err != nil {
			return l, fmt.Errorf("lean run, %s: %w", s.name, err)
		}
		s.res = res
		l.settles = append(l.settles, s.leanSettle)
	}
	logf("cost: the lean backstop over %d items", backstopItems)
	bs, err := bench.MeasureBackstop(ctx, endpoint, backstopItems-backstopMissed, backstopMissed)
	if err != nil {
		return l, fmt.Errorf("backstop: %w", err)
	}
	l.backstop = bs
	l.choose()
	return l, nil
}

// choose picks the settle that costs less at leanRate, write units,
// storage and backstop together; the tombstone on a tie.
func (l *leanPath) choose() {
	l.pick = 0
	costs := l.settleCosts(leanRate)
	for i, c := range costs {
		if c.total() < costs[l.pick].total() {
			l.pick = i
		}
	}
}

// model is the backstop's cost model over a table of items, from the
// measured pass.
func (l leanPath) model(items int) bench.BackstopModel {
	m := l.backstop
	runs := float64(max(len(m.Runs), 1))
	return bench.BackstopModel{
		Items: items, ItemBytes: m.ItemBytes, RRUPerItem: m.RRU() / float64(max(m.Items, 1)),
		Pages: dynamo.DefaultBackstopPages, PageSize: dynamo.DefaultBackstopPageSize,
		ReadsPerRun: float64(m.Requests.Count("DynamoDB.GetItem")) / runs,
		SavesPerRun: float64(m.Requests.Writes()["other"]) / runs,
		Period:      sweepPeriod, Grace: bench.BackstopGrace,
	}
}

// settleCost is what one settle costs per million messages at a rate:
// its write units, the storage of what it leaves, and the backstop over
// the table it leaves.
type settleCost struct {
	settle                        leanSettle
	table, index, requests        float64
	writes, storage, backstop     float64
	items                         int
	kept                          bool
	keptBytes, perHour, longestIn float64
}

func (c settleCost) total() float64 { return c.writes + c.storage + c.backstop }

// settleCosts compares the two settles at rate messages a second: a
// tombstone table holds a day of messages (the default retention); a
// table whose rows are deleted holds only the rows in flight, rate times
// the run's mean time from staging to the wake.
func (l leanPath) settleCosts(rate float64) []settleCost {
	out := make([]settleCost, len(l.settles))
	for i, s := range l.settles {
		r := s.res
		n := float64(max(r.WakeDelivered, 1))
		all, tbl := r.Wake.WCU(bench.IndexWrites)/n, r.Wake.WCU(map[string]int{})/n
		c := settleCost{settle: s, table: tbl, index: all - tbl, requests: float64(r.Wake.Total("DynamoDB", true)) / n,
			kept: r.Kept > 0, keptBytes: r.KeptBytes}
		c.writes = all * bench.PriceWRU.Each() * 1e6
		var items int
		if c.kept {
			retention := dynamo.DefaultDoneRetention
			c.storage = bench.StoragePerMillion(r.KeptBytes, retention)
			items = int(rate * retention.Seconds())
		} else {
			items = max(1, int(rate*meanLag(r).Seconds()+0.5))
		}
		m := l.model(items)
		c.items, c.backstop, c.perHour, c.longestIn = items, m.PerMillion(rate), m.DollarsPerHour(), m.LongestWait().Minutes()
		out[i] = c
	}
	return out
}

// meanLag is the run's mean time from a row's staging to the wake.
func meanLag(r bench.StreamResult) time.Duration {
	if len(r.WakeLags) == 0 {
		return time.Second
	}
	var t time.Duration
	for _, d := range r.WakeLags {
		t += d
	}
	return t / time.Duration(len(r.WakeLags))
}

// writeLean writes the lean section of cost.md: the goal, the backstop's
// cost by table size, and the two settles compared.
func writeLean(w func(string, ...any), usages []bench.Usage, l leanPath, stageFor time.Duration) error {
	var lean bench.Usage
	for _, u := range usages {
		if u.Name == "Outflow, lean" {
			lean = u
		}
	}
	total := bench.Total(lean.PerMillion())
	const goalDollars = 1.45
	w("### Lean: the backstop and the settle")
	w("")
	costs := l.settleCosts(leanRate)
	w("Goal: lean at most $%.2f per million messages to an SQS standard queue with `Put` staging. Measured: **%s**, %s. With `TransactItem`: %s. The backstop's reads and the storage of what the settle leaves are a cost by the hour, below: at %s messages a second they add %s a million.",
		goalDollars, dollars(total), verdict(total <= goalDollars), dollars(bench.Total(lean.InTransaction().PerMillion())),
		rateText(leanRate), dollars(costs[l.pick].storage+costs[l.pick].backstop))
	w("")
	m := l.backstop
	at := l.model(m.Items)
	if at.RunsPerPass() != len(m.Runs) || at.PagesPerPass() != m.Pages() {
		return fmt.Errorf("backstop model: %d pages in %d runs at %d items, the pass made %d in %d", at.PagesPerPass(), at.RunsPerPass(), m.Items, m.Pages(), len(m.Runs))
	}
	w("**The backstop.** A lean row is in no index: if the stream never brings it to the wake (a mapping disabled or throttled past the stream's 24-hour retention, a batch whose retries ran out), only a scan of the table finds it. Each scheduled sweep runs the backstop (`dynamo.Backstop`): up to %d Scan pages of up to %s items (a page also ends at 1 MB), from where the last run stopped, keeping the pending or claimed rows with no shard older than the wake grace (%s), each of which it puts in the due index for the sweep. DynamoDB bills a Scan page by the bytes of every item it evaluates, before the filter and the projection, summed and rounded up to the next 4 KB, half a read unit per 4 KB for an eventually consistent page: so the scan costs what the table weighs, tombstones and dead letters included, whatever it finds.",
		dynamo.DefaultBackstopPages, num(dynamo.DefaultBackstopPageSize), bench.BackstopGrace)
	w("")
	w("Measured against moto on a table of %s items: %s tombstones (lean rows staged by the producer and settled as the wake settles them, kept as done under the default retention; %d per queue staged and settled so, the rest copies of them under their own keys) with %d missed lean rows among them, left pending with no shard. The backstop, at its default budget, ran until its pass ended: %d runs, %d pages, %s items evaluated, all %d missed rows found. Each page was read again, whole, on an uncounted client, and priced by the rule above from the sizes of the items it evaluated: %s read units for the pass (%.1f-byte items, %.2f read units a full page of %s), %.4f per item. Each run also read the backstop's own item (%.0f consistent read, 1 unit) and saved its place (%.0f write, 1 unit). moto took %s for the pass, which says nothing of DynamoDB's time, so Lambda duration is left out: at 100 ms a page it would add %s an hour at most.",
		num(m.Items), num(m.Tombstones), bench.BackstopTemplates, m.Missed, len(m.Runs), m.Pages(), num(m.Items), m.Found(), numf(m.RRU()), m.ItemBytes,
		bench.ScanRRU(int(m.ItemBytes*float64(at.ItemsPerPage())), false), num(at.ItemsPerPage()), at.RRUPerItem, at.ReadsPerRun, at.SavesPerRun,
		m.Elapsed().Round(time.Second), dollars(60*float64(dynamo.DefaultBackstopPages)*0.1*float64(lambdaMemoryMB)/1024*bench.PriceLambdaARM.Each()))
	w("")
	w("Other table sizes are extrapolated linearly from that pass (read units per item evaluated; pages and runs by the budget). Under the default retention a tombstone stays a day, so a table holds a day of messages: the second column is the rate that fills it so. One run per sweep, every %s; a pass takes as many runs as it has pages over %d. The longest a missed row waits is the grace, a whole pass (the scan may have just passed its place) and one sweep period.", sweepPeriod, dynamo.DefaultBackstopPages)
	w("")
	w("| items in the table | a day of messages at | Scan pages per pass | a pass, in sweeps (minutes) | read units per sweep, a pass's mean | write units per sweep | dollars per hour | dollars per 30-day month | longest a missed row waits | dollars per million messages at that rate |")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, items := range []int{m.Items, 100_000, 1_000_000, 10_000_000} {
		md := l.model(items)
		rate := float64(items) / (24 * 3600)
		label := num(items)
		if items == m.Items {
			label += " (measured)"
		}
		w("| %s | %s/s | %s | %s | %.1f | %.0f | %s | %s | %s | %s |", label, rateText(rate), num(md.PagesPerPass()), num(md.RunsPerPass()),
			md.RRUPerRun(), md.SavesPerRun, dollarsFine(md.DollarsPerHour()), dollars(md.DollarsPerHour()*24*30), waitText(md.LongestWait()), dollars(md.PerMillion(rate)))
	}
	w("")
	capped := l.model(10_000_000)
	w("Past %s items the budget caps a sweep's reads, so the dollars per hour stop growing (%s a month) and the pass grows instead: a missed row waits about a minute longer per %s items. `OUTFLOW_BACKSTOP_PAGES` trades one for the other: twice the pages, twice the dollars per hour and half the pass. Per message the backstop is a fixed cost spread over the traffic, as the sweep's schedule is: small at a high rate, large at a low one.",
		num(dynamo.DefaultBackstopPages*at.ItemsPerPage()), dollars(capped.DollarsPerHour()*24*30), num(dynamo.DefaultBackstopPages*at.ItemsPerPage()))
	w("")
	w("**Delete or tombstone.** The wake settles a lean row with one write: an `UpdateItem` to done, kept for `OUTFLOW_DONE_RETENTION` (24 h by default) and then removed by TTL for free, or with the retention 0 a `DeleteItem`. Both lean runs above (the same staging, %d rows over %s each) measured the settle by the same rule; the table's cost is compared at %s messages a second, where a day of tombstones is %s items and a table whose rows are deleted holds only those in flight (the rate times the run's mean %s from staging to the wake) and its dead letters (none here, and as many either way).", costs[0].settle.res.WakeDelivered, stageFor, rateText(leanRate), num(costs[0].items), meanLag(costs[1].settle.res).Round(10*time.Millisecond))
	w("")
	w("| settle of a lean row | write requests per message, settle | write units, table / due index | left in the table | settle, per million | storage, per million | backstop at %s/s, per million (table of) | settle, storage and backstop, per million | longest a missed row waits |", rateText(leanRate))
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, c := range costs {
		left := "nothing"
		if c.kept {
			left = fmt.Sprintf("a %.0f-byte item for 24 h", c.keptBytes)
		}
		w("| %s (%s) | %.2f | %.2f / %.2f | %s | %s | %s | %s (%s) | %s | %s |", c.settle.name, c.settle.retention, c.requests, c.table, c.index, left,
			dollars(c.writes), dollars(c.storage), dollars(c.backstop), items(c.items), dollars(c.total()), waitText(time.Duration(c.longestIn*float64(time.Minute))))
	}
	w("")
	cheap, dear := costs[l.pick], costs[1-l.pick]
	low := l.settleCosts(1)
	w("Both settles cost one write unit (an item under 1 KB) and touch no index. The %s is the cheaper by %s a million at %s messages a second, and by %s at 1 a second, where the backstop's fixed cost is spread over fewer messages; almost all of the difference is the backstop's reads of a day of tombstones, the rest their storage. So the lean column uses the %s. What the tombstone buys is idempotency: for the retention, a producer's retry of a delivered key is recognised as staged rather than staged and sent again; a table that needs it keeps the default and pays the difference, and a missed row can wait %s there rather than %s.",
		cheap.settle.name, dollars(dear.total()-cheap.total()), rateText(leanRate), dollars(low[1-l.pick].total()-low[l.pick].total()),
		cheap.settle.name, waitText(time.Duration(costs[0].longestIn*float64(time.Minute))), waitText(time.Duration(costs[1].longestIn*float64(time.Minute))))
	w("")
	return nil
}

// items writes a count of items.
func items(n int) string {
	if n == 1 {
		return "1 item"
	}
	return num(n) + " items"
}

// rateText writes a rate of messages a second.
func rateText(r float64) string {
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0f", r)
	case r >= 1:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

// waitText writes a wait in minutes or hours.
func waitText(d time.Duration) string {
	if d < 2*time.Hour {
		return fmt.Sprintf("%.1f min", d.Minutes())
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// dollarsFine writes a small amount of dollars to four places.
func dollarsFine(d float64) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("$%.4f", d)
}
