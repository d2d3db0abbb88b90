package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
)

// statsFlags are the flags of outflow stats.
type statsFlags struct {
	exact, blocked bool
	cap            int
	routes, queues string
}

func (a *app) statsCommand() *cobra.Command {
	var f statsFlags
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count due, not yet due and failed rows per shard and per queue, and the backlog lag; --exact and --blocked read rows for claimed rows and blocked ordered groups",
		Long: "By default stats makes count queries only, a fixed number whatever the backlog: per shard, the due-index entries due now " +
			"and not yet due, and the oldest due entry; per dead queue (the route names of --routes or OUTFLOW_ROUTES, --queues, and (none)), " +
			"the dead-index entries. Each count stops at --cap entries and is then reported as a lower bound (≥). " +
			"A claim leaves the index alone, so due counts claimed rows too; without routes or queues, dead letters are tallied from a scan of the " +
			"dead index, capped alike: every queue's, those of routes the dispatcher no longer publishes included, which its published routes would miss. --exact reads every due row's status and every dead letter (requests and memory grow with the " +
			"backlog) to tell claimed rows apart, count each queue's pending and due rows, the blocked ordered groups, and the dead letters by outcome (see dead list). " +
			"--blocked counts only the blocked ordered groups: an ordered group is blocked when its earliest dead letter blocks it " +
			"(see dead list), and the oldest blocked age is how long the oldest such dead letter has been dead. " +
			"Stray rows, on a shard the sweep never queries (a producer with a larger OUTFLOW_SHARDS, or a shard that is not a number), " +
			"are not in the counts: the sweep's audit finds them and moves them to their key's shard, and stats reports what it found, " +
			"in its last full pass over the due index, in the pass under way, and in all. " +
			"Lean rows (OUTFLOW_LEAN) the stream never brought to the wake are in no index until the sweep's backstop, " +
			"a scan of the table, finds them and puts them in the due index: once it has run, stats reports what it found " +
			"(in its last full pass over the table, in the pass under way, and in all), the longest any of them had waited, " +
			"and when its last full pass began and ended.",
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ordered, err := a.ordered(cmd.Context())
			if err != nil {
				return err
			}
			if f.cap < 0 {
				return usagef("--cap must be 0 (no cap) or more, got %d", f.cap)
			}
			var deadQueues []string
			if !f.exact {
				if deadQueues, err = a.deadQueues(cmd.Context(), f); err != nil {
					return err
				}
			}
			op, err := a.operator(cmd.Context())
			if err != nil {
				return err
			}
			now := a.now()
			out, err := operate.Stats(cmd.Context(), op, now, operate.StatsQuery{Exact: f.exact, Blocked: f.blocked, DeadQueues: deadQueues, Cap: f.cap}, ordered)
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			// One eventually consistent read of the backstop's item, as
			// of the audit's: its counts need the scan it spreads over
			// many sweeps.
			found, err := op.Backstopped(cmd.Context())
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			rep := statsReport{Report: out, Backstop: backstopOf(found)}
			st := out.Stats
			return a.emit(rep, func(w io.Writer) {
				if st.Exact {
					printExact(w, st)
				} else {
					printCounts(w, st)
				}
				fmt.Fprintf(w, "\noldest due row waiting\t%dms\n", out.OldestDueAgeMs)
				if st.BlockedCounted {
					fmt.Fprintf(w, "blocked ordered groups\t%d\n", st.BlockedGroups)
					fmt.Fprintf(w, "oldest blocked head\t%dms\n", out.OldestBlockedAgeMs)
				} else {
					fmt.Fprintln(w, "blocked ordered groups\tnot counted (--blocked)")
				}
				if out.DeadOutcomes != nil {
					fmt.Fprintf(w, "dead letters by outcome\t%s\n", outcomes(out.DeadOutcomes))
				} else {
					fmt.Fprintln(w, "dead letters by outcome\tnot told apart (--exact; dead list's OUTCOME): failed counts purged rows whose closing message failed too")
				}
				fmt.Fprintf(w, "stray rows found by the audit\t%d last pass, %d this pass, %d in all\n", st.Stray.LastPass, st.Stray.ThisPass, st.Stray.Total)
				printBackstop(w, rep.Backstop)
			})
		},
	}
	cmd.Flags().BoolVar(&f.exact, "exact", false, "read every due row's status and every dead letter: claimed rows, per-queue pending and due, blocked groups (costs grow with the backlog)")
	cmd.Flags().BoolVar(&f.blocked, "blocked", false, "also count the blocked ordered groups (reads every dead letter of a FIFO route)")
	cmd.Flags().IntVar(&f.cap, "cap", dynamo.DefaultCountCap, "count at most this many index entries per shard bucket and dead queue, then report a lower bound (0: count to the end)")
	cmd.Flags().StringVar(&f.routes, "routes", "", "queue routes name=url,... whose dead letters to count (default $OUTFLOW_ROUTES)")
	cmd.Flags().StringVar(&f.queues, "queues", "", "more queues whose dead letters to count, name,... (a queue with no route)")
	a.orderedFlag(cmd)
	return cmd
}

// deadQueues is the dead-index partitions stats counts: the route names,
// --queues and "(none)"; none at all when neither routes nor queues are
// given, and Count then tallies a scan of the dead index. Not the
// published routes: a route the dispatcher dropped leaves its rows dead
// under a queue name it no longer routes, exactly the dead letters
// UnroutedRowsAlarm sends an operator to find (review 25).
func (a *app) deadQueues(ctx context.Context, f statsFlags) ([]string, error) {
	v, from := f.routes, "--routes"
	if v == "" {
		v, from = a.getenv("OUTFLOW_ROUTES"), "OUTFLOW_ROUTES"
	}
	routes, err := delivery.ParseRoutes(v)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", from, err)}
	}
	set := map[string]bool{}
	for name := range routes {
		set[name] = true
	}
	for _, q := range strings.Split(f.queues, ",") {
		if q = strings.TrimSpace(q); q != "" {
			set[q] = true
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	set[dynamo.DeadQueueNone] = true
	return slices.Sorted(maps.Keys(set)), nil
}

// printExact prints what Stats read: every state per queue and per shard.
func printExact(w io.Writer, st *dynamo.Stats) {
	table := func(title string, m map[string]*dynamo.Counts) {
		fmt.Fprintf(w, "%s\tPENDING\tDUE NOW\tCLAIMED\tFAILED\n", title)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			c := m[k]
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", k, c.Pending, c.Due, c.Claimed, c.Failed)
		}
	}
	table("QUEUE", st.Queues)
	fmt.Fprintf(w, "total\t%d\t%d\t%d\t%d\n\n", st.Total.Pending, st.Total.Due, st.Total.Claimed, st.Total.Failed)
	table("SHARD", st.Shards)
}

// printCounts prints what Count counted: due and not yet due per shard,
// dead letters per queue, ≥ before a lower bound.
func printCounts(w io.Writer, st *dynamo.Stats) {
	n := func(v int, atLeast bool) string {
		if atLeast {
			return fmt.Sprintf("≥%d", v)
		}
		return fmt.Sprint(v)
	}
	// Total.AtLeast marks any capped count; each total here is marked
	// only when one of its own counts was.
	fmt.Fprintln(w, "SHARD\tDUE NOW\tNOT YET DUE")
	capped := false
	for _, k := range slices.SortedFunc(maps.Keys(st.Shards), byNumber) {
		c := st.Shards[k]
		capped = capped || c.AtLeast
		fmt.Fprintf(w, "%s\t%s\t%s\n", k, n(c.Due, c.AtLeast), n(c.Pending-c.Due, c.AtLeast))
	}
	fmt.Fprintf(w, "total\t%s\t%s\n\n", n(st.Total.Due, capped), n(st.Total.Pending-st.Total.Due, capped))
	fmt.Fprintln(w, "QUEUE\tFAILED")
	capped = false
	for _, k := range slices.Sorted(maps.Keys(st.Queues)) {
		c := st.Queues[k]
		capped = capped || c.AtLeast
		fmt.Fprintf(w, "%s\t%s\n", k, n(c.Failed, c.AtLeast))
	}
	fmt.Fprintf(w, "total\t%s\n\n", n(st.Total.Failed, capped))
	fmt.Fprintln(w, "claimed rows\tcounted as due: a claim leaves the index alone (--exact tells them apart)")
	if st.DeadCounted == dynamo.DeadCountedScan {
		fmt.Fprintln(w, "dead letters\ttallied from a scan of the dead index: no routes known (--routes, OUTFLOW_ROUTES or --queues count each queue)")
	} else {
		fmt.Fprintln(w, "dead letters\tof the queues listed only (--queues adds a queue with no route; --exact reads them all)")
	}
	if st.Cap > 0 {
		fmt.Fprintf(w, "counts capped at\t%d entries per shard bucket and dead queue; ≥ marks a lower bound (--cap 0 counts to the end)\n", st.Cap)
	}
}

// outcomes is a tally of dead letters by outcome, by name: "none" when
// there is none.
func outcomes(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// byNumber orders shard names as numbers.
func byNumber(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// statsReport is what outflow stats reports: the backlog, and what the
// lean backstop found, when it has run.
type statsReport struct {
	operate.Report
	// Backstop is read from the backstop's item; nil, and left out, when
	// the backstop never ran (a dispatcher never lean).
	Backstop *backstopReport `json:"backstop,omitempty"`
}

// backstopReport is dynamo.BackstopCounts as outflow stats gives it:
// the wait in milliseconds, as the other ages.
type backstopReport struct {
	// LastPass counts the lean rows the last full pass over the table
	// found and put in the due index, ThisPass those of the pass under
	// way, Total every one.
	LastPass int `json:"last_pass"`
	ThisPass int `json:"this_pass"`
	Total    int `json:"total"`
	// LongestWaitMs is the longest any row it found had waited, from its
	// staging to the backstop's find.
	LongestWaitMs int64 `json:"longest_wait_ms"`
	// PassStarted is when the pass under way began; LastPassStarted and
	// LastPassEnded bound the last full one. Each absent when there is
	// none.
	PassStarted     time.Time `json:"pass_started,omitzero"`
	LastPassStarted time.Time `json:"last_pass_started,omitzero"`
	LastPassEnded   time.Time `json:"last_pass_ended,omitzero"`
	// LeanAt is the last time the backstop ran lean or found a row: it
	// keeps running for OUTFLOW_BACKSTOP_DRAIN after it.
	LeanAt time.Time `json:"lean_at,omitzero"`
}

// backstopOf is c as stats reports it, nil when the backstop never ran:
// its item holds nothing.
func backstopOf(c dynamo.BackstopCounts) *backstopReport {
	if c == (dynamo.BackstopCounts{}) {
		return nil
	}
	return &backstopReport{LastPass: c.LastPass, ThisPass: c.ThisPass, Total: c.Total, LongestWaitMs: c.LongestWait.Milliseconds(),
		PassStarted: c.PassStarted, LastPassStarted: c.LastPassStarted, LastPassEnded: c.LastPassEnded, LeanAt: c.LeanAt}
}

// printBackstop prints what the backstop found; nothing when it never ran.
func printBackstop(w io.Writer, b *backstopReport) {
	if b == nil {
		return
	}
	fmt.Fprintf(w, "lean rows found by the backstop\t%d last pass, %d this pass, %d in all\n", b.LastPass, b.ThisPass, b.Total)
	fmt.Fprintf(w, "longest wait of a row it found\t%dms\n", b.LongestWaitMs)
	if b.LastPassEnded.IsZero() {
		fmt.Fprintln(w, "backstop's last full pass\tnone yet")
	} else {
		fmt.Fprintf(w, "backstop's last full pass\t%s to %s\n", when(b.LastPassStarted), when(b.LastPassEnded))
	}
	if !b.PassStarted.IsZero() {
		fmt.Fprintf(w, "backstop's pass under way\tbegan %s\n", when(b.PassStarted))
	}
}
