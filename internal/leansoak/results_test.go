package leansoak_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// results is what the run left: the table's rows, the queues' messages
// and the backstop's item, beside what the soak recorded.
type results struct {
	s        *sim
	states   map[string]outbox.Status
	received map[string]map[string]int // by route, then row key
	counts   dynamo.BackstopCounts
	// The bound on a missed row's wait, from the backstop's page budget
	// and the most items one of its passes read.
	passItems, pagesPerPass, sweepsPerCycle int
	passTime, foundBound, deliveredBound    time.Duration
}

// results reads what the run left, receiving every message off the
// queues, and works out the bound on a missed row's wait.
func (s *sim) results(ctx context.Context) *results {
	t := s.t
	t.Helper()
	states, err := s.scan(ctx, false)
	require.NoError(t, err)
	r := &results{s: s, states: states, received: map[string]map[string]int{}}
	for route, url := range s.routes {
		r.received[route], err = s.drainQueue(ctx, url)
		require.NoError(t, err)
	}
	r.counts, err = s.store.Backstopped(ctx)
	require.NoError(t, err)

	// A pass reads every item of the table once: at most passItems,
	// pagesPerPass pages (one more when the last page is full). From
	// wherever the cursor stands, a full cycle over the table is one page
	// more, sweepsPerCycle scheduled sweeps at the backstop's pages per
	// sweep. A row the stream missed is a candidate After (the wake's
	// grace) after it was staged; the next sweep is at most one period
	// later, and the cycle from there reads it, so it is found within
	// After plus sweepsPerCycle periods; one more period is slack.
	cur := 0
	for _, tl := range s.ticks {
		cur += tl.backstop.Scanned
		if tl.backstop.PassDone {
			r.passItems, cur = max(r.passItems, cur), 0
		}
	}
	r.passItems = max(r.passItems, cur)
	r.pagesPerPass = (r.passItems+s.f.pageSize-1)/s.f.pageSize + 1
	r.sweepsPerCycle = (r.pagesPerPass + 1 + s.f.pages - 1) / s.f.pages
	r.passTime = time.Duration(r.sweepsPerCycle) * s.f.sweepEvery
	r.foundBound = s.backstop.After + r.passTime + s.f.sweepEvery
	// The bound on a row staged in the outage: the outage, a
	// pass, and a sweep's period.
	r.deliveredBound = (s.f.when.outageTo - s.f.when.outageFrom) + r.passTime + s.f.sweepEvery
	return r
}

// checkNoneLost: every row was delivered (a copy reached its queue) or
// dead-lettered, none is left pending or claimed, and none was settled
// as delivered without a copy on its queue.
func (r *results) checkNoneLost(t *testing.T) {
	s := r.s
	var unsettled, lost []string
	for _, row := range s.rows {
		require.False(t, row.stagedAt.IsZero(), "%s was never staged", row.key)
		st := r.states[row.key]
		copies := s.wire.copiesOf(row.key)
		switch {
		case st == outbox.StatusPending || st == outbox.StatusClaimed:
			unsettled = append(unsettled, s.explain(row, r.states))
		case st == outbox.StatusFailed:
		case len(copies) == 0:
			lost = append(lost, s.explain(row, r.states))
		}
	}
	require.Empty(t, unsettled, "rows left pending or claimed")
	require.Empty(t, lost, "rows settled as delivered (done, or deleted) that no queue received: lost")
}

// checkQueues: the standard queue received exactly the copies the wire
// counted, key by key; the FIFO queue, which drops a copy whose
// deduplication id it saw in the last 5 minutes, every key the wire
// counted and no other.
func (r *results) checkQueues(t *testing.T) {
	s := r.s
	want := map[string]map[string]int{routeEvents: {}, routeOrdered: {}}
	for _, row := range s.rows {
		route := routeEvents
		if row.kind == kindOrdered {
			route = routeOrdered
		}
		s.wire.mu.Lock()
		if n := len(s.wire.sends[row.key]); n > 0 {
			want[route][row.key] = n
		}
		s.wire.mu.Unlock()
	}
	require.Equal(t, want[routeEvents], r.received[routeEvents], "the standard queue holds every copy the wire counted")
	require.ElementsMatch(t, slices.Collect(maps.Keys(want[routeOrdered])), slices.Collect(maps.Keys(r.received[routeOrdered])),
		"the FIFO queue holds every row the wire counted")
}

// checkDuplicates: a row of which more than one copy reached its queue
// crossed a fault window that may send it twice.
func (r *results) checkDuplicates(t *testing.T) {
	s := r.s
	var unexplained []string
	for _, row := range s.rows {
		if len(s.wire.copiesOf(row.key)) > 1 && s.dupCause(row) == "" {
			unexplained = append(unexplained, s.explain(row, r.states))
		}
	}
	require.Empty(t, unexplained, "rows sent more than once with no fault to explain it")
}

// checkMissed: only lean rows are found by the backstop; every lean row
// whose record never reached the wake is found; each is found within
// the bound the backstop's budget gives, and delivered within the
// issue's (the outage, a pass, a period).
func (r *results) checkMissed(t *testing.T) {
	s := r.s
	for k, at := range s.found {
		row := s.byKey[k]
		require.NotNil(t, row, "the backstop indexed %s, which the soak never staged", k)
		require.True(t, row.lean, "the backstop indexed a row staged in the due index: %s", s.explain(row, r.states))
		require.LessOrEqual(t, at.Sub(row.stagedAt), r.foundBound, "found within After + a cycle + a period: %s", s.explain(row, r.states))
		if copies := s.wire.copiesOf(k); len(copies) > 0 {
			require.LessOrEqual(t, copies[0].at.Sub(row.stagedAt), r.deliveredBound, "delivered within the outage + a pass + a period: %s", s.explain(row, r.states))
		}
	}
	for _, row := range s.rows {
		if row.lean && row.deliveries == 0 {
			_, found := s.found[row.key]
			require.True(t, found, "a lean row whose record never reached the wake must be found: %s", s.explain(row, r.states))
		}
	}
}

// checkCounts: the backstop's item counts the rows its runs indexed, and
// the longest wait among them.
func (r *results) checkCounts(t *testing.T) {
	s := r.s
	indexed, longest := 0, time.Duration(0)
	for _, tl := range s.ticks {
		require.Len(t, tl.backstop.Keys, tl.backstop.Indexed, "at %s", s.rel(tl.at))
		require.Zero(t, tl.backstop.Errors, "at %s", s.rel(tl.at))
		indexed += tl.backstop.Indexed
		longest = max(longest, tl.backstop.LongestWait)
	}
	require.Equal(t, len(s.found), indexed)
	require.Equal(t, indexed, r.counts.Total, "the item's total is the rows indexed")
	require.Equal(t, longest.Milliseconds(), r.counts.LongestWait.Milliseconds(), "the item's longest wait is the runs' longest")
	require.LessOrEqual(t, r.counts.LastPass+r.counts.ThisPass, r.counts.Total)
}

// checkDrain: the backstop runs at every sweep while lean is on; once it
// is off, it runs exactly while the last sweep that saw lean on, or that
// found a row, is within the drain. A stale producer's lean row, found
// after the switch, kept it running past the switch's own drain, and it
// stopped before lean came back on.
func (r *results) checkDrain(t *testing.T) {
	s, when := r.s, r.s.f.when
	var leanAt, lastFoundOff, lastRanOff time.Time
	stopped := false
	for _, tl := range s.ticks {
		if tl.lean {
			require.True(t, tl.backstop.Ran, "the backstop runs at every sweep while lean is on (at %s)", s.rel(tl.at))
			leanAt = tl.at
			continue
		}
		require.Equal(t, tl.at.Before(leanAt.Add(when.drain)), tl.backstop.Ran,
			"lean off at %s: the backstop runs while within %s of %s, the last sweep that saw lean on or found a row", s.rel(tl.at), when.drain, s.rel(leanAt))
		if tl.backstop.Ran {
			lastRanOff = tl.at
		} else {
			stopped = true
		}
		if tl.backstop.Indexed > 0 {
			leanAt, lastFoundOff = tl.at, tl.at
		}
	}
	require.True(t, stopped, "the backstop stopped after its drain")
	require.True(t, lastFoundOff.Sub(s.start) > when.leanOff, "a stale producer's lean row was found after lean was switched off")
	require.GreaterOrEqual(t, lastRanOff.Sub(s.start), when.leanOff+when.drain, "finding it kept the backstop running past the switch's drain")
}

// report sums the run up.
func (r *results) report(wall time.Duration) string {
	s, when := r.s, r.s.f.when
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("lean soak, %s form: %d rows, seed %d; sweep every %s, backstop %d page(s) of %d items a sweep, drain %s, done retention %s, wake grace %s",
		s.f.name, len(s.rows), s.seed, s.f.sweepEvery, s.f.pages, s.f.pageSize, when.drain, s.f.retention, s.policy.WakeGrace)
	line("timeline: stream retention %s; mapping off %s-%s (records of its first %s expire), throttled to %s; lean off %s-%s (one producer stale %s, mapping off %s-%s); staging ends %s, run ends %s",
		when.retention, when.outageFrom, when.outageTo, when.outageTo-when.outageFrom-when.retention, when.throttleTo, when.leanOff, when.leanOn,
		when.staleFor, when.blipFrom, when.blipTo, when.stagingEnd, s.rel(s.clock.Now()))

	kinds, phases, lean, stale := map[kind]int{}, map[string]int{}, 0, 0
	for _, row := range s.rows {
		kinds[row.kind]++
		phases[row.phase]++
		if row.lean {
			lean++
		}
		if row.stale {
			stale++
		}
	}
	line("staged: %d: lean %d (%d of them by a stale producer while lean was off), unordered in the due index %d, delayed %d, ordered %d",
		len(s.rows), lean, stale, kinds[kindPlain]-lean, kinds[kindDelayed], kinds[kindOrdered])
	var ph []string
	for _, name := range slices.Sorted(maps.Keys(phases)) {
		ph = append(ph, fmt.Sprintf("%s %d", name, phases[name]))
	}
	line("  by phase: %s", strings.Join(ph, "; "))

	fates := map[string]int{}
	for _, row := range s.rows {
		if row.fate != "" {
			fates[row.fate]++
		}
	}
	line("stream: %d invocations; records expired %d, dropped by the throttle %d, discarded after %d crashes %d; batches crashed %d (retried %d, discarded %d), handed over twice %d, given no time %d",
		s.invocations, fates["expired"], fates["dropped"], streamRetries+1, fates["discarded"], s.crashes, s.retried, s.discarded, s.redelivered, s.outOfTime)

	byWake, bySweep, dead, sent := 0, 0, 0, 0
	dups := map[string]int{}
	dupKeys := 0
	for _, row := range s.rows {
		copies := s.wire.copiesOf(row.key)
		if len(copies) > 0 {
			sent++
			if copies[0].by == "wake" {
				byWake++
			} else {
				bySweep++
			}
		}
		if r.states[row.key] == outbox.StatusFailed {
			dead++
		}
		if len(copies) > 1 {
			dupKeys++
			cause := s.dupCause(row)
			if cause == "" {
				cause = "UNEXPLAINED"
			}
			dups[cause]++
		}
	}
	lost := 0
	for _, row := range s.rows {
		if len(s.wire.copiesOf(row.key)) == 0 && r.states[row.key] != outbox.StatusFailed {
			lost++
		}
	}
	line("delivered: %d rows (first copy by the wake %d, by the sweep %d); dead letters %d; lost %d", sent, byWake, bySweep, dead, lost)
	line("wake: sent claim-free %d, delivered %d, handed over to the due index %d, retried %d, dead-lettered %d, conflicts %d, errors %d",
		s.wake.Unclaimed, s.wake.Delivered, s.wake.Indexed, s.wake.Retried, s.wake.DeadLettered, s.wake.Conflicts, s.wake.Errors)
	line("sweep: %d runs; claimed %d, delivered %d, retried %d, dead-lettered %d, expired %d, conflicts %d, errors %d",
		len(s.ticks), s.sweep.Claimed, s.sweep.Delivered, s.sweep.Retried, s.sweep.DeadLettered, s.sweep.Expired, s.sweep.Conflicts, s.sweep.Errors)

	ran, pages, scanned, passes := 0, 0, 0, 0
	units := 0.0
	for _, tl := range s.ticks {
		if tl.backstop.Ran {
			ran++
		}
		pages += tl.backstop.Pages
		scanned += tl.backstop.Scanned
		units += tl.backstop.ReadUnits
		if tl.backstop.PassDone {
			passes++
		}
	}
	line("backstop: ran at %d of %d sweeps, %d Scan pages, %d items scanned, %.1f read units (as moto reports), %d passes; the longest pass read %d items (%d pages, a cycle %d sweeps = %s)",
		ran, len(s.ticks), pages, scanned, units, passes, r.passItems, r.pagesPerPass, r.sweepsPerCycle, r.passTime)
	why := map[string]int{}
	var longestFound, longestDelivered, longestOutage time.Duration
	var longestKey string
	for k, at := range s.found {
		row := s.byKey[k]
		switch {
		case row.fate != "":
			why["record "+row.fate]++
		case row.deliveries == 0 || row.firstDelivered.After(at):
			why["record late"]++
		default:
			why["left unsettled by the wake"]++
		}
		longestFound = max(longestFound, at.Sub(row.stagedAt))
		if copies := s.wire.copiesOf(k); len(copies) > 0 {
			w := copies[0].at.Sub(row.stagedAt)
			if w > longestDelivered {
				longestDelivered, longestKey = w, k
			}
			if row.windows&winOutage != 0 {
				longestOutage = max(longestOutage, w)
			}
		}
	}
	var ws []string
	for _, name := range slices.Sorted(maps.Keys(why)) {
		ws = append(ws, fmt.Sprintf("%s %d", name, why[name]))
	}
	line("missed rows found by the backstop: %d (%s); its item: total %d, last pass %d, longest wait %s", len(s.found), strings.Join(ws, ", "),
		r.counts.Total, r.counts.LastPass, r.counts.LongestWait)
	line("longest wait of a missed row: found %s after staging (bound %s = grace + cycle + period), delivered %s after (%s; bound %s = outage + pass + period); of a row staged in the outage: delivered %s after",
		longestFound, r.foundBound, longestDelivered, longestKey, r.deliveredBound, longestOutage)
	var ds []string
	for _, name := range slices.Sorted(maps.Keys(dups)) {
		ds = append(ds, fmt.Sprintf("%s %d", name, dups[name]))
	}
	line("duplicates: %d rows sent more than once (%s)", dupKeys, strings.Join(ds, "; "))

	var lastFound, lastRan, stoppedAt, backAt time.Time
	for _, tl := range s.ticks {
		d := tl.at.Sub(s.start)
		if d < when.leanOff || d >= when.leanOn {
			if d >= when.leanOn && backAt.IsZero() && tl.backstop.Ran {
				backAt = tl.at
			}
			continue
		}
		if tl.backstop.Indexed > 0 {
			lastFound = tl.at
		}
		if tl.backstop.Ran {
			lastRan = tl.at
		} else if stoppedAt.IsZero() {
			stoppedAt = tl.at
		}
	}
	line("drain: lean off at %s; the last stale lean row found at %s; the backstop last ran at %s, first stood still at %s, ran again at %s (lean on at %s)",
		when.leanOff, s.rel(lastFound), s.rel(lastRan), s.rel(stoppedAt), s.rel(backAt), when.leanOn)
	line("%s", strings.ReplaceAll(s.plan.Report(), "\n", "\n  "))
	line("wall time: %s", wall.Round(time.Second))
	return b.String()
}
