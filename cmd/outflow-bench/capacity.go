package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/capacity"
)

// goalDrain is the partitioned sweep's goal from issue 17.
const goalDrain = "1,000,000-row backlog drain, 16 partitions vs 1 (capacity model)"

func init() {
	why[goalDrain] = "With 16 partitions over 16 shards each sweep owns one shard, whose index takes 1,000 settles a second; the sweeps back off their claims on throttling and retry throttled settles within the lease, so what is left is the drain's periods: docs/capacity.md, \"Where it saturates\", has the runs."
}

// capacityModel runs the capacity simulation (internal/capacity's
// TestCapacityModel: synctest needs a test binary) and writes
// out/capacity.md from its report. With from set, it renders that saved
// report instead of running the model again; keep names a file to save
// the report in.
func capacityModel(out, from, keep string) (capacity.Report, error) {
	var rep capacity.Report
	path := from
	if path == "" {
		tmp, err := os.CreateTemp("", "capacity-*.json")
		if err != nil {
			return rep, err
		}
		_ = tmp.Close()
		defer func() { _ = os.Remove(tmp.Name()) }()
		path = tmp.Name()
		logf("capacity model: the engine against the simulated store, in virtual time")
		cmd := exec.Command("go", "test", "./internal/capacity", "-run", "^TestCapacityModel$", "-count=1", "-timeout", "30m", "-v", "-args", "-out", path)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return rep, fmt.Errorf("capacity model: %w", err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("capacity report: %w", err)
	}
	if keep != "" {
		if err := os.WriteFile(keep, b, 0o644); err != nil {
			return rep, err
		}
	}
	doc := renderCapacity(rep, out)
	path = filepath.Join(out, "capacity.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return rep, err
	}
	logf("wrote %s", path)
	return rep, nil
}

// drainByName finds a drain of the report.
func drainByName(rep capacity.Report, name string) (capacity.DrainCase, bool) {
	for _, d := range rep.Drains {
		if d.Name == name {
			return d, true
		}
	}
	return capacity.DrainCase{}, false
}

// drainRatio is the k=1 drain time over the named k=16 one.
func drainRatio(rep capacity.Report, name string) float64 {
	k1, ok1 := drainByName(rep, "k=1")
	k16, ok16 := drainByName(rep, name)
	if !ok1 || !ok16 || k16.Seconds == 0 {
		return 0
	}
	return k1.Seconds / k16.Seconds
}

// capacityGoal records the drain goal.
func capacityGoal(rep capacity.Report, goal func(name, target, measured string, ok bool)) {
	r := drainRatio(rep, "k=16")
	goal(goalDrain, "≥ 12×", fmt.Sprintf("%.1f×", r), r >= 12)
}

func dur(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%.1fs", s)
}

// num writes n with thousands separators, as the docs write numbers.
func num[T int | int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// numf is num of a float, rounded.
func numf(f float64) string { return num(int64(math.Round(f))) }

// periods says "1 period" or "N periods".
func periods(n int) string {
	if n == 1 {
		return "1 period"
	}
	return num(n) + " periods"
}

func stops(m map[string]int) string {
	var parts []string
	for _, k := range []string{"budget", "deadline", "drained", "canceled", "refused"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// writeDrains is the short section of benchmarks.md on the drains.
func writeDrains(w func(string, ...any), rep capacity.Report) {
	w("## Draining a backlog with partitioned sweeps (capacity model)")
	w("")
	w("The real engine against a simulated DynamoDB and SQS (%.0f ms and %.0f ms a call, %s index WCU/s per shard, the SDK's retries) in virtual time, the template's defaults, the wake off: %s rows backlogged, swept by K partitions over max(K, 4) shards, and over 64. Details, the model's assumptions and the sizing it gives: [capacity.md](capacity.md).", rep.StoreLatencyMs, rep.SendLatencyMs, numf(rep.ShardCeiling), num(rep.Rows))
	w("")
	w("| partitions | shards | drain time | sweep periods | rows/s per sweep invocation |")
	w("| --- | --- | --- | --- | --- |")
	for _, name := range []string{"k=1", "k=4", "k=16", "k=16, 64 shards"} {
		if d, ok := drainByName(rep, name); ok {
			w("| %d | %d | %s | %d | %s |", d.Partitions, d.Shards, dur(d.Seconds), d.Ticks, numf(d.Sweep.RowsPerS))
		}
	}
	w("")
	w("16 partitions drain it **%.1f×** faster than one over max(K, 4) shards, **%.1f×** over 64 shards (4 a partition), where no settle is throttled.", drainRatio(rep, "k=16"), drainRatio(rep, "k=16, 64 shards"))
	w("")
}

// renderCapacity writes docs/capacity.md.
func renderCapacity(rep capacity.Report, out string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Capacity")
	w("")
	w("Generated by `make bench` (`go run ./cmd/outflow-bench -only capacity` for this file alone) on %s; the simulation took %s of real time on a 2-core machine shared with other work (its jobs run side by side, one bubble each). Every figure below comes from that run: the real engine (`outbox.Engine`: `SweepPartition` and `DeliverKeys`) against a simulated store and queue in virtual time (internal/capacity). Rerun to refresh.", time.Now().UTC().Format("2006-01-02"), dur(rep.RealSeconds))
	w("")
	w("## Sizing")
	w("")
	w("One line per staging rate: the smallest `Shards` the simulation found, and the sweep settings the rules below give for it, the template's defaults where they suffice. The last three columns are measured: the busiest shard's index writes in its busiest second over %.0f s of steady staging (wake and sweep running), the wake invocations running at once then, and a minute of staging left to the sweep alone (the wake off), as after a wake outage.", rep.SteadySeconds)
	w("")
	w("| staging rate (rows/s) | `Shards` | `SweepPartitions` | `RowBudget` | `Concurrency` | `WakeParallelizationFactor` | memory (MB) | busiest shard (index WCU/s) | wake invocations at once (stream shards) | a minute of staging, sweep alone |")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range rep.Sizing {
		var chosen capacity.SteadyResult
		for _, t := range s.Tried {
			if t.Shards == s.Shards {
				chosen = t
			}
		}
		bs := s.Backstop
		w("| %s | %d | %d | %s | %d | %d | 256 | %s | %d (%d) | %s, %s throttled attempts |", numf(s.Rate), s.Shards, s.Partitions, num(s.RowBudget), s.Concurrency, s.PF,
			num(chosen.PeakShardWCU), chosen.Wake.PeakConcurrent, chosen.StreamShards, dur(bs.Seconds), num(bs.Throttles))
	}
	w("")
	w("Lambda concurrency: the sweeps need `SweepPartitions` at once (each ends within a period), the wake at most its stream shards × `WakeParallelizationFactor`; the column gives the most wake invocations the steady run had at once. Reserve, or keep free in the account, their sum.")
	w("")
	w("`Shards` is the smallest count that holds the rate. Where it is below the template's default, 4, keep 4 (shards never shrink, and more shards cost nothing while idle), with the other settings the rules below give for 4 shards.")
	w("")
	w("Memory is the template's default (`SweepMemoryMB`, `WakeMemoryMB`): the simulation does not measure memory; [benchmarks.md](benchmarks.md) measures a sweep's peak RSS over a backlog. A `RowBudget` above the default does not add to it: a sweep keeps what it learned of a row for its recent pages only (benchmarks.md, \"Memory over a backlog\").")
	w("")
	w("### The rules behind it")
	w("")
	w("- **Shards** = ceil(2 × rate / (%.0f%% × %s)). Each row costs its due-index shard 2 index write units (stage 1, done 1; the claim writes none, [architecture.md](architecture.md), \"What each transition costs in index writes\"), and one shard is one partition key of the index, whose partition absorbs %s WCU/s. The simulation searched from that figure for the smallest count whose busiest shard stayed within %.0f%% of the ceiling in every second, with no throttled write:", 100*rep.Headroom, numf(rep.ShardCeiling), numf(rep.ShardCeiling), 100*rep.Headroom)
	w("")
	w("  | rate | formula | simulated | tried (shards: busiest second, mean per shard, in index WCU/s) |")
	w("  | --- | --- | --- | --- |")
	for _, s := range rep.Sizing {
		var tried []string
		for _, t := range s.Tried {
			tried = append(tried, fmt.Sprintf("%d: %s, %s", t.Shards, num(t.PeakShardWCU), numf(t.MeanShardWCU)))
		}
		w("  | %s | %d | %d | %s |", numf(s.Rate), s.Formula, s.Shards, strings.Join(tried, "; "))
	}
	w("")
	w("  Where the simulation asks for more than the formula, the difference is the key hash's uneven spread and second-to-second bursts: the busiest shard runs above the mean.")
	w("- **SweepPartitions** = min(Shards, ceil(rate × SweepRate / RowBudget)): one period's row budgets cover a period of staging, so the sweep alone keeps up if the wake stops.")
	w("- **RowBudget** = the default %s, or, when the partitions hit the shards, 1.25 × rate × SweepRate / SweepPartitions rounded up to a thousand (the hash spreads rows only roughly evenly).", num(rep.RowBudget))
	w("- **Concurrency** = min(%d, 4 × Shards / SweepPartitions): a sweep settles about Concurrency / (%.0f ms) rows a second, one index write each, on the shards it owns; 4 per owned shard keeps that near 800 WCU/s a shard. The default, %d, is safe too: a sweep backs its claims off on throttling (\"Where it saturates\"); the rule spares the throttled attempts of a sweep's first seconds.", rep.Concurrency, rep.StoreLatencyMs, rep.Concurrency)
	w("- **WakeParallelizationFactor** = 1: one wake invocation delivers %s rows/s over full batches, and every steady run kept up with a factor of 1 (%s stream records dropped for age, `WakeMaxRecordAgeSeconds`, over all the steady runs). Raise it if the table has fewer stream shards than assumed below: stream shards × factor must cover rate / %s wake invocations.", numf(rep.WakeRowsPerS), num(dropped(rep)), numf(rep.WakeRowsPerS))
	w("")
	w("## Throughput per invocation")
	w("")
	if d, ok := drainByName(rep, "k=1"); ok {
		w("- **Sweep**, shards with room: **%s rows/s** per invocation (median, the k=1 drain: %d partition over %d shards). It is bound by the claims: %d at a time, %.0f ms each.", numf(d.Sweep.RowsPerS), d.Partitions, d.Shards, d.Concurrency, rep.StoreLatencyMs)
	}
	if d, ok := drainByName(rep, "k=16"); ok {
		w("- **Sweep** owning one shard: **%s rows/s** (the k=16 drain, %d shards): the shard's index ceiling, %s WCU/s at one write per settle.", numf(d.Sweep.RowsPerS), d.Shards, numf(rep.ShardCeiling))
	}
	w("- **Wake**, full batches of %d records: **%s rows/s** per invocation, %.0f ms a batch (one `DeliverKeys` call).", rep.WakeBatchSize, numf(rep.WakeRowsPerS), 1000*rep.WakeBatchSeconds)
	w("")
	w("## Draining a backlog of %s rows", num(rep.Rows))
	w("")
	w("The wake off (`WakeGrace` 0), the rows due at once, the schedule starting every partition each %.0f s. K partitions over max(K, 4) shards, then variations that each lift or add one limit.", rep.SweepRateS)
	w("")
	w("| case | partitions | shards | `RowBudget` | `Concurrency` | sweep concurrency cap | drain time | periods | rows/s per sweep | sweeps stopped by | throttled attempts | in a sweep's first 2 s | past the SDK's retries | errors surfaced | rows sent twice | least claim concurrency | busiest shard (WCU in a second) |")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, d := range rep.Drains {
		capTxt := "none"
		if d.SweepConcurrency > 0 {
			capTxt = fmt.Sprint(d.SweepConcurrency)
		}
		w("| %s | %d | %d | %s | %d | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %d | %s |", d.Name, d.Partitions, d.Shards, num(d.RowBudget), d.Concurrency, capTxt,
			dur(d.Seconds), d.Ticks, numf(d.Sweep.RowsPerS), stops(d.Sweep.Stopped), num(d.Throttles), num(d.EarlyThrottles), num(d.Surfaced), num(d.Sweep.Errors), num(d.Duplicates), d.Sweep.ClaimConcurrency, num(d.PeakShardWCU))
	}
	w("")
	w("\"Past the SDK's retries\" are throttled requests whose every SDK attempt was refused: on a settle, the engine tries them again within the row's lease (below); \"errors surfaced\" are the store calls the engine gave up on, whose rows wait for their lease to end and are then sent again (\"rows sent twice\"). \"Least claim concurrency\" is the lowest any sweep of the drain backed off to (it starts at `Concurrency`).")
	w("")
	w("k=16 against k=1: **%.1f×** faster with max(K, 4) shards, **%.1f×** with 64 shards (the issue's goal: at least 12×).", drainRatio(rep, "k=16"), drainRatio(rep, "k=16, 64 shards"))
	w("")
	w("## Where it saturates")
	w("")
	writeSaturation(w, rep)
	w("## What the simulation models, and what it does not")
	w("")
	w("Modeled:")
	w("")
	w("- The engine is the real one, with the template's policy defaults (`RowBudget` %s, `Concurrency` %d, `DeadlineMargin` %.0f s, `PageSize` %d, `BatchLinger`, lease, backoff) unless a line says otherwise. Time is virtual (`testing/synctest`): latency is a sleep, and the clock jumps when every goroutine waits.", num(rep.RowBudget), rep.Concurrency, rep.DeadlineMarginS, rep.PageSize)
	w("- The store keeps rows with the real conditional semantics (claim, done, retry, release, dead letter, expire) and a due index per shard ordered by due time, rows placed by `dynamo.ShardFor`. Every request takes %.0f ms; a SendMessageBatch %.0f ms.", rep.StoreLatencyMs, rep.SendLatencyMs)
	w("- Each due-index shard is one GSI partition with a ceiling of %s WCU/s: a token bucket, refilled at that rate, holding one second of it, charged with each transition's index writes (stage 1, done 1, retry 2, dead letter 1, claim and release 0). A write that does not fit is throttled, and the SDK answers as the version in go.mod configures the DynamoDB client: up to %d attempts, a throttle backed off uniformly in [0, 1 s × 2^(attempt−1)) (at most 20 s), out of a 500-token retry quota per client (5 per throttled retry, 1 back per first-attempt success). Each throttled attempt is reported to the sweep (`outbox.NoteThrottle`, as the DynamoDB adapter's middleware does), which backs off its claims; after the last attempt the error reaches the engine as an `outbox.ThrottledError`. A done, retry or dead-letter write refused so is tried again by the engine, 250 ms later and doubling to 8 s, while the row's lease lasts; a settle given up leaves its row claimed until the lease ends, and then it is claimed and sent again (the \"rows sent twice\" column). Staging writes are charged too (in steady runs) and always applied: a staging throttle is counted, not retried.", numf(rep.ShardCeiling), rep.SDKMaxAttempts)
	w("- The sweep: every partition is started each `SweepRate` (%.0f s), all at the tick (the fan-out's async invokes are taken as instant); a sweep runs to its timeout (%.0f s) but stops claiming %.0f s (the deadline margin) before the next tick of its partition, as `OUTFLOW_SWEEP_RATE` makes the handler do; rows it claimed are sent after that. Each invocation has its own SDK client (retry quota). A sweep concurrency cap makes starts wait, in order, for a running sweep to end, as Lambda's async queue holds throttled events.", rep.SweepRateS, rep.SweepTimeoutS, rep.DeadlineMarginS)
	w("- The wake: one stream record per staged row, on the stream shard of its key; one poller per stream shard reads four times a second, takes up to `WakeBatchSize` (%d) records per invocation (one `DeliverKeys` call, 30 s timeout), with `WakeParallelizationFactor` invocations per stream shard, and reads again at once while full batches wait; records older than 60 s are dropped for the sweep.", rep.WakeBatchSize)
	w("- The queue is an SQS standard queue: no API rate limit, so the sink never throttles.")
	w("")
	w("Not modeled:")
	w("")
	w("- **CPU time**: computing costs nothing in virtual time. The engine's CPU per row is measured in [benchmarks.md](benchmarks.md) (engine overhead); at 256 MB a Lambda has a fraction of a vCPU, so a sweep near the rates above may be CPU-bound before it is latency-bound.")
	w("- Latency spread: every call takes exactly its latency; real tails make invocations slower, not the index ceiling lower.")
	w("- The table's own partitions, read ceilings (3,000 RCU per partition: a page of small projections is far below), the table's account-level throughput quotas (on-demand tables default to 40,000 WCU/s; each row costs 3 table WCU: stage, claim, done), DynamoDB's burst and adaptive capacity beyond one second, and hot partitions that DynamoDB splits (it cannot split one partition key, which a shard is).")
	w("- The number of stream shards: DynamoDB decides it from the table's partitions. The simulation assumes one per 1,000 table WCU/s the rate needs (3 per row), at least 4.")
	w("- Lambda cold starts and invocation overhead, the fan-out's own invokes, the stray-row audit, ordered groups (every row is unordered), delivery failures and retries (the queue accepts everything), FIFO queues' API limits.")
	w("")
	w("## Operator tools at scale")
	w("")
	if ops, err := os.ReadFile(filepath.Join(out, "capacity-operators.md")); err == nil {
		w("%s", strings.TrimSpace(stripTitle(string(ops))))
	} else {
		w("Generated separately into docs/capacity-operators.md by `go run ./cmd/outflow-bench -only operators`, and included here when that file exists.")
	}
	w("")
	return b.String()
}

// stripTitle drops a leading "# " or "## " title, so an included file's sections
// sit under this document's.
func stripTitle(s string) string {
	if strings.HasPrefix(s, "# ") || strings.HasPrefix(s, "## ") {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			return strings.TrimLeft(s[i+1:], "\n")
		}
		return ""
	}
	return s
}

// dropped counts the stream records the steady runs dropped for age.
func dropped(rep capacity.Report) int64 {
	var n int64
	for _, s := range rep.Sizing {
		for _, t := range s.Tried {
			n += t.Dropped
		}
	}
	return n
}

// afterSDK says what became of the throttled requests the SDK's retries
// did not absorb, in the k=16 and k=4 drains and in the one with the
// SDK's retries off.
func afterSDK(k16, k4, bare capacity.DrainCase) string {
	var b strings.Builder
	if k16.Surfaced == 0 && k4.Surfaced == 0 {
		b.WriteString("No request was throttled past the SDK's retries, so no settle was left to the engine's retry: ")
	} else {
		fmt.Fprintf(&b, "%s requests were throttled past the SDK's retries (k=4: %s); the engine retried those settles within the lease: ", num(k16.Surfaced), num(k4.Surfaced))
	}
	fmt.Fprintf(&b, "%s errors surfaced and %s rows were sent twice (k=4: %s and %s), and the drain took %s.", num(k16.Sweep.Errors), num(k16.Duplicates), num(k4.Sweep.Errors), num(k4.Duplicates), periods(k16.Ticks))
	if bare.Name != "" {
		fmt.Fprintf(&b, " With the SDK's retries off (one attempt a request), every one of its %s throttled attempts reached the engine; it retried the settles among them within the lease: %s rows were sent twice and %s errors surfaced, in %s (%s).", num(bare.Throttles), num(bare.Duplicates), num(bare.Sweep.Errors), periods(bare.Ticks), dur(bare.Seconds))
	}
	return b.String()
}

// writeSaturation explains, from the drains, which limit stops each.
func writeSaturation(w func(string, ...any), rep capacity.Report) {
	k1, _ := drainByName(rep, "k=1")
	k4, _ := drainByName(rep, "k=4")
	k16, _ := drainByName(rep, "k=16")
	wide, _ := drainByName(rep, "k=16, 64 shards")
	low, _ := drainByName(rep, "k=16, concurrency 4")
	big, _ := drainByName(rep, "k=16, 64 shards, budget 100,000")
	capped, _ := drainByName(rep, "k=16, sweep concurrency 4")
	bare, _ := drainByName(rep, "k=16, no SDK retry")
	window := rep.SweepRateS - rep.DeadlineMarginS
	w("- **RowBudget per invocation** is the first limit: with k=1 every sweep stopped on its budget (sweeps: %s), so the backlog drains at K × %s rows per %.0f s period however fast each sweep is; %s rows take ceil(%s / (K × %s)) periods. A sweep at %s rows/s spends its %s rows in %.1f s of the %.0f s it may claim for.",
		stops(k1.Sweep.Stopped), num(rep.RowBudget), rep.SweepRateS, num(rep.Rows), num(rep.Rows), num(rep.RowBudget), numf(k1.Sweep.RowsPerS), num(rep.RowBudget), float64(rep.RowBudget)/max(k1.Sweep.RowsPerS, 1), window)
	w("- **The per-shard index ceiling** is the next: with 16 partitions over 16 shards (and 4 over 4) each sweep owns one shard and settles at %s rows/s, the shard's %s WCU/s, where its %d claimers would go %s rows/s. A sweep starts at `Concurrency` claims in flight; at a throttled attempt it halves them, at most once a second, and adds one back each second without a throttle (additive increase, multiplicative decrease), down to %d at the least here. %s write attempts were throttled (k=4: %s), %s of them (%.0f%%) in a sweep's first 2 s, before its backoff takes hold: the shard's second of burst hides the overshoot until it is spent, and rows claimed at full concurrency still settle after the cut. %s Owning 4 shards a partition (64 shards) removes the throttling: %s rows/s a sweep, %s throttled attempts, %s in %s. So does a concurrency of 4: %s rows/s, %s throttled attempts, %s.",
		numf(k16.Sweep.RowsPerS), numf(rep.ShardCeiling), k16.Concurrency, numf(k1.Sweep.RowsPerS), k16.Sweep.ClaimConcurrency,
		num(k16.Throttles), num(k4.Throttles), num(k16.EarlyThrottles), 100*float64(k16.EarlyThrottles)/max(float64(k16.Throttles), 1),
		afterSDK(k16, k4, bare),
		numf(wide.Sweep.RowsPerS), num(wide.Throttles), dur(wide.Seconds), periods(wide.Ticks), numf(low.Sweep.RowsPerS), num(low.Throttles), dur(low.Seconds))
	w("- **The timeout / sweep period** bounds a sweep's rows at its rate × %.0f s (the period less the deadline margin; the %.0f s timeout is longer than the period, so the period binds): with the budget lifted to 100,000 on 64 shards, the drain took %s in %s (sweeps: %s), each sweep taking %s rows, under the %s the period allows at %s rows/s. A budget above that is never reached; a longer timeout does not help while the period is shorter.",
		window, rep.SweepTimeoutS, dur(big.Seconds), periods(big.Ticks), stops(big.Sweep.Stopped), numf(big.Sweep.RowsPerInvocation), numf(window*big.Sweep.RowsPerS), numf(big.Sweep.RowsPerS))
	w("- **Lambda concurrency** (reserved, or what the account has left) caps the sweeps running at once, not the sweeps per period: 16 partitions under a cap of 4 took %s in %s (%d sweeps at most at once), against %s in %s uncapped: about the same, because each sweep spends its budget in %.1f s, so 4 slots run all 16 in about %.0f s, within a period. A cap slows the drain once cap × %.0f s / (RowBudget / a sweep's rate) < K.",
		dur(capped.Seconds), periods(capped.Ticks), capped.Sweep.PeakConcurrent, dur(k16.Seconds), periods(k16.Ticks),
		float64(rep.RowBudget)/max(k16.Sweep.RowsPerS, 1), 4*float64(rep.RowBudget)/max(k16.Sweep.RowsPerS, 1), window)
	w("")
	w("The drain time is about ceil(rows / (K × min(RowBudget, rate × %.0f s))) periods, where a sweep's rate is min(Concurrency / %.0f ms, shards per partition × %s); the K16/K1 ratio falls short of K when the last period is partly used. Before the sweeps backed off and retried throttled settles, it fell short too where settles throttled past the SDK's retries held rows until their lease (5 minutes) ended: 11 periods instead of 7 at k=16, 9.9× (docs/capacity.md of 2026-12-03).", window, rep.StoreLatencyMs, numf(rep.ShardCeiling))
	w("")
}

// spliceCapacity brings the capacity parts of an existing benchmarks.md
// (the drain section, the drain goal's row and its line under the missed
// goals) in step with rep, so `-only capacity` refreshes both files from
// one run of the model. A benchmarks.md without them is left alone.
func spliceCapacity(path string, rep capacity.Report) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	doc := string(b)
	var sec strings.Builder
	writeDrains(func(format string, args ...any) { fmt.Fprintf(&sec, format+"\n", args...) }, rep)
	fmt.Fprintf(&sec, "This section and the drain goal come from the model's run that `go run ./cmd/outflow-bench -only capacity` made with capacity.md (%s), not from the rest of this page's run.\n\n", time.Now().UTC().Format("2006-01-02"))
	const heading = "## Draining a backlog with partitioned sweeps (capacity model)\n"
	if i := strings.Index(doc, heading); i >= 0 {
		end := len(doc)
		if j := strings.Index(doc[i+len(heading):], "\n## "); j >= 0 {
			end = i + len(heading) + j + 1
		}
		doc = doc[:i] + sec.String() + doc[end:]
	}
	var row [4]string
	capacityGoal(rep, func(name, target, measured string, ok bool) {
		row = [4]string{name, target, measured, "met"}
		if !ok {
			row[3] = "**missed**"
		}
	})
	var lines []string
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(l, "| "+goalDrain+" |"):
			l = fmt.Sprintf("| %s | %s | %s | %s |", row[0], row[1], row[2], row[3])
		case strings.HasPrefix(l, "- "+goalDrain+":"):
			if row[3] == "met" {
				continue
			}
			l = fmt.Sprintf("- %s: %s against %s. %s", row[0], row[2], row[1], why[goalDrain])
		}
		lines = append(lines, l)
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}
