package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
	"github.com/outflowhq/outflow/internal/moto"
)

// quietCase is one line of the quiet-by-default table.
type quietCase struct {
	name string
	cfg  bench.StreamConfig
	res  bench.StreamResult
}

// quietRuns measures refused conditional writes under live traffic: the
// wake on, and K = 1, 2, 4 partition sweeps, then two overlapping whole
// sweeps for contrast, each on its own table at endpoint.
func quietRuns(ctx context.Context, endpoint string, rows int, stageFor time.Duration) ([]quietCase, error) {
	base := bench.StreamConfig{
		Rows: rows, Stage: stageFor, Producers: 4, Shards: 8, Tick: 3 * time.Second,
		Ordered: true, Delayed: 0.3, Poll: 250 * time.Millisecond, BatchSize: 100,
		Timeout: stageFor + 3*time.Minute,
	}
	cases := []quietCase{{name: "K = 1"}, {name: "K = 2"}, {name: "K = 4"}, {name: "two overlapping whole sweeps (before `OUTFLOW_SWEEP_RATE`)"}}
	for i := range cases {
		c := base
		switch i {
		case 3:
			c.Overlap = true
		default:
			c.Partitions = 1 << i
		}
		cases[i].cfg = c
		logf("quiet: %s, %d rows over %s", cases[i].name, rows, stageFor)
		res, err := bench.RunStream(ctx, endpoint, c)
		if err != nil {
			return nil, fmt.Errorf("quiet run %s: %w", cases[i].name, err)
		}
		cases[i].res = res
	}
	return cases, nil
}

// writeQuiet writes the quiet-by-default section.
func writeQuiet(w func(string, ...any), cases []quietCase) {
	c := cases[0].cfg
	w("## Quiet by default: refused conditional writes")
	w("")
	w("A live run against the moto server per line, each on its own table with %d due-index shards: %d producers stage %d rows of %d-byte payloads in batches of 5, evenly over %s, over four queues; the FIFO queue's rows are in ordered groups (the route listed as ordered, each producer owning 8 groups) and %.0f%% of the other rows carry a `NotBefore` 1–8 s out, which the wake leaves to the sweep. The wake runs as in `outflow local`: the table's stream polled every %s, the template's filter (inserts of pending rows), and `DeliverRefs` on batches of up to %d records, one after another. The sweeps (default policy: 15 s wake grace) start together every %s: K partition sweeps (`SweepPartition` for 0..K−1), or, for contrast, two whole-table sweeps at once, what a sweep longer than its schedule period did before `OUTFLOW_SWEEP_RATE`; a tick that comes while they run is skipped. A run ends when every row is delivered.",
		c.Shards, c.Producers, c.Rows, bench.PayloadBytes, c.Stage, 100*c.Delayed, c.Poll, c.BatchSize, c.Tick)
	w("")
	w("Refused writes are counted twice, independently: the engine's `Result.Conflicts` summed over every sweep and wake invocation, and the `ConditionalCheckFailed` responses an SDK middleware saw.")
	w("")
	w("| sweeps | rows delivered | by the wake | by sweeps | sweeps run | wake invocations | wake lag p50 / max | `Result.Conflicts` (wake + sweep) | per 1,000 messages | `ConditionalCheckFailed` responses | per 1,000 messages |")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, q := range cases {
		r := q.res
		p50, _ := bench.Percentiles(r.WakeLags)
		w("| %s | %d | %d | %d | %d | %d | %s / %s | %d (%d + %d) | %.2f | %d | %.2f |", q.name, r.Delivered, r.WakeDelivered, r.SweepDelivered, r.SweepRuns, r.WakeRuns,
			p50.Round(10*time.Millisecond), slices.Max(append(r.WakeLags, 0)).Round(10*time.Millisecond),
			r.Conflicts(), r.WakeConflicts, r.SweepConflicts, r.PerThousand(r.Conflicts()), r.Refused(), r.PerThousand(r.Refused()))
	}
	w("")
	w("The refused writes, by path, transition and kind of row (the wake lag is from a row's `Put` to the wake invocation given it):")
	w("")
	w("| sweeps | by transition | by kind of row |")
	w("| --- | --- | --- |")
	for _, q := range cases {
		w("| %s | %s | %s |", q.name, which(q.res.RefusedBy()), which(q.res.RefusedRows()))
	}
	w("")
}

// runQuietOnly runs the refused-writes part alone and prints its section.
func runQuietOnly(c costSizes) error {
	ctx := context.Background()
	srv, err := moto.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	cases, err := quietRuns(ctx, srv.URL, c.quietRows, c.stageFor)
	if err != nil {
		return err
	}
	var doc strings.Builder
	writeQuiet(func(format string, args ...any) { fmt.Fprintf(&doc, format+"\n", args...) }, cases)
	fmt.Print(doc.String())
	return nil
}

// which lists refused writes by transition, largest first.
func which(m map[string]int) string {
	if len(m) == 0 {
		return "—"
	}
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
