package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/bench"
)

// memorySizes are the backlogs the memory section sweeps, each in a fresh
// process: the goals compare each larger one with the first.
var memorySizes = []int{10_000, 100_000, 1_000_000}

// memoryHeading opens the memory section of benchmarks.md; `-only memory`
// replaces the section under it.
const memoryHeading = "## Memory over a backlog\n"

// memoryWhy explains a missed memory goal.
const memoryWhy = "A sweep keeps what it learned of a row (a hold against a lagging due index, a settled predecessor a successor may still ask for, a link it read) for two rounds of its pages only (internal/outbox/age.go): its live heap stops growing once a backlog is larger than that. A peak heap that grows with the backlog means something again keeps an entry per row settled, as `run.held` and `order.settled` did for the whole run until issue 24 (measured before the change: 14.6 MB at 10k rows, 62.6 MB at 100k, 560.1 MB at 1M; with `GOGC=50`, 12.6 MB and 49.5 MB); `TestSweep_KeepsPerRowStateForItsRecentPagesNotForEveryRowItSettled` checks the run's maps. With the live heap flat, the sampled peak still moves by a few MB with when the collector runs: a 10k sweep ends after a handful of collections, a larger one runs through many."

// memoryGoalName is the goal comparing a backlog of rows with the first.
func memoryGoalName(rows int) string {
	return fmt.Sprintf("peak heap at %s backlog vs %s", shortRows(rows), shortRows(memorySizes[0]))
}

// shortRows writes 10000 as 10k and 1000000 as 1M.
func shortRows(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func init() {
	for _, n := range memorySizes[1:] {
		why[memoryGoalName(n)] = memoryWhy
	}
}

// memoryRuns is how many fresh processes sweep each backlog: the section
// reports the run of median peak heap. A peak is the most the heap held
// between two collections, so one run's moves by a few MB with when the
// collector happened to run, most in the shortest sweep.
const memoryRuns = 5

// measureMemory sweeps each of memorySizes memoryRuns times, each in a
// fresh process of this binary (-memory), so one run's heap does not carry
// into the next, and keeps the run of median peak heap of each size.
func measureMemory() ([]bench.Memory, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var mems []bench.Memory
	for _, n := range memorySizes {
		var runs []bench.Memory
		for range memoryRuns {
			b, err := exec.Command(self, "-memory", strconv.Itoa(n)).Output()
			if err != nil {
				return nil, fmt.Errorf("memory run %d: %w", n, err)
			}
			var m bench.Memory
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, err
			}
			logf("memory: %d rows: peak heap %.1f MB", n, float64(m.PeakHeap)/1e6)
			runs = append(runs, m)
		}
		slices.SortFunc(runs, func(a, b bench.Memory) int { return cmp.Compare(a.PeakHeap, b.PeakHeap) })
		mems = append(mems, runs[len(runs)/2])
	}
	return mems, nil
}

// memoryGoals sets the memory goals: each larger backlog's peak heap at
// most 1.5 times the first's.
func memoryGoals(mems []bench.Memory, goal func(name, target, measured string, ok bool)) {
	for _, m := range mems[1:] {
		r := float64(m.PeakHeap) / float64(mems[0].PeakHeap)
		goal(memoryGoalName(m.Rows), "≤ 1.5×", fmt.Sprintf("%.2f×", r), r <= 1.5)
	}
}

// writeMemory writes the memory section.
func writeMemory(w func(string, ...any), mems []bench.Memory) {
	w("## Memory over a backlog")
	w("")
	w("One sweep of the whole backlog (synthetic store, zero latency, `RowBudget` unlimited, 4 shards, pages of 1,000), each size swept %d times, each in a fresh process, and the run of median peak heap shown; the heap is sampled every millisecond. The synthetic store keeps one bit per row plus the rows in flight, included in the heap.", memoryRuns)
	w("")
	w("| backlog | peak heap | peak RSS | store's own share |")
	w("| --- | --- | --- | --- |")
	for _, m := range mems {
		w("| %d | %.1f MB | %.1f MB | %.1f MB |", m.Rows, float64(m.PeakHeap)/1e6, float64(m.PeakRSS)/1e6, float64(m.StoreSize)/1e6)
	}
	w("")
	w("A sweep keeps what it learned of a row only while a later page or pass may still ask for it: a hold that spares a refused claim of a row whose due-index entry lags, a settled predecessor for its successor, a link it read. Each is dropped once the sweep has queried two more rounds of pages (one page per shard each), or when the row that could ask for it is settled, so the live heap stops growing past about 8,000 rows here; the peak above it is the collector's headroom (`GOGC`), which moves by a few MB with when the collector runs. Until issue 24 the sweep kept every settled row's hold (`run.held`) and group entry (`order.settled`) for the whole run: the peak grew with the backlog because of that kept state, not garbage between collections (on the commit before the fix, 5e3bee4, `-memory` measured 14.6 MB at 10k rows, 62.6 MB at 100k and 560.1 MB at 1M; with `GOGC=50`, 12.6 MB and 49.5 MB at 10k and 100k).")
	w("")
}

// runMemoryOnly measures the memory section alone and splices it, with
// its goals, into out/benchmarks.md.
func runMemoryOnly(out string) error {
	mems, err := measureMemory()
	if err != nil {
		return err
	}
	var sec strings.Builder
	writeMemory(func(format string, args ...any) { fmt.Fprintf(&sec, format+"\n", args...) }, mems)
	fmt.Fprintf(&sec, "This section and the memory goals come from `go run ./cmd/outflow-bench -only memory` (%s), not from the rest of this page's run.\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Print(sec.String())
	var goals [][4]string
	memoryGoals(mems, func(name, target, measured string, ok bool) {
		verdict := "met"
		if !ok {
			verdict = "**missed**"
		}
		goals = append(goals, [4]string{name, target, measured, verdict})
	})
	for _, g := range goals {
		fmt.Printf("| %s | %s | %s | %s |\n", g[0], g[1], g[2], g[3])
	}
	path := filepath.Join(out, "benchmarks.md")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := spliceSection(string(b), memoryHeading, sec.String(), "## Lambda\n")
	doc = spliceGoals(doc, goals)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return err
	}
	logf("wrote the memory section and goals of %s", path)
	return nil
}

// spliceGoals brings the rows of goals in benchmarks.md's goal table, and
// their lines under the missed goals, in step with goals: the rows go
// where the first of their old rows was (at the table's end if none was),
// a missed goal gets its line, a met one loses it.
func spliceGoals(doc string, goals [][4]string) string {
	lines := strings.Split(doc, "\n")
	row := func(g [4]string) string { return fmt.Sprintf("| %s | %s | %s | %s |", g[0], g[1], g[2], g[3]) }
	missed := func(g [4]string) string { return fmt.Sprintf("- %s: %s against %s. %s", g[0], g[2], g[1], why[g[0]]) }
	var out []string
	at := -1
	for _, l := range lines {
		drop := false
		for _, g := range goals {
			if strings.HasPrefix(l, "| "+g[0]+" |") {
				drop = true
				if at < 0 {
					at = len(out)
				}
			}
			if strings.HasPrefix(l, "- "+g[0]+":") {
				drop = true
			}
		}
		if !drop {
			out = append(out, l)
		}
	}
	// Else at the end of the goal table, the first table: its rows follow
	// "| goal |".
	for i := 0; at < 0 && i < len(out); i++ {
		if strings.HasPrefix(out[i], "| goal |") {
			at = i + 1
			for at < len(out) && strings.HasPrefix(out[at], "|") {
				at++
			}
		}
	}
	if at >= 0 {
		var rows []string
		for _, g := range goals {
			rows = append(rows, row(g))
		}
		out = append(out[:at], append(rows, out[at:]...)...)
	}
	var miss []string
	for _, g := range goals {
		if g[3] != "met" {
			miss = append(miss, missed(g))
		}
	}
	for i, l := range out {
		if l != "## Where goals are missed" {
			continue
		}
		j := i + 1
		if j < len(out) && out[j] == "" {
			j++
		}
		if len(miss) > 0 && j < len(out) && out[j] == "None in this run." {
			out = append(out[:j], out[j+1:]...)
		}
		if len(miss) > 0 {
			out = append(out[:j], append(miss, out[j:]...)...)
		}
		break
	}
	return strings.Join(out, "\n")
}
