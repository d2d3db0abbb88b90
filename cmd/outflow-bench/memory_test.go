package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpliceGoals_ReplacesTheMemoryGoalsInPlaceAndTheirMissedLines checks
// how `-only memory` brings its goals into an existing benchmarks.md: the
// old rows' place in the goal table, a line under the missed goals for a
// missed one only.
func TestSpliceGoals_ReplacesTheMemoryGoalsInPlaceAndTheirMissedLines(t *testing.T) {
	t.Parallel()
	k100, m1 := memoryGoalName(100_000), memoryGoalName(1_000_000)
	require.Equal(t, "peak heap at 100k backlog vs 10k", k100)
	doc := "# B\n\n## Goals\n\n| goal | target | measured | |\n| --- | --- | --- | --- |\n| a | 1 | 1 | met |\n" +
		"| " + k100 + " | ≤ 1.5× | 4.85× | **missed** |\n| b | 2 | 2 | met |\n\n## Where goals are missed\n\n" +
		"- " + k100 + ": 4.85× against ≤ 1.5×. old reason\n"

	got := spliceGoals(doc, [][4]string{{k100, "≤ 1.5×", "1.20×", "met"}, {m1, "≤ 1.5×", "1.60×", "**missed**"}})
	require.Equal(t, "# B\n\n## Goals\n\n| goal | target | measured | |\n| --- | --- | --- | --- |\n| a | 1 | 1 | met |\n"+
		"| "+k100+" | ≤ 1.5× | 1.20× | met |\n| "+m1+" | ≤ 1.5× | 1.60× | **missed** |\n| b | 2 | 2 | met |\n\n## Where goals are missed\n\n"+
		"- "+m1+": 1.60× against ≤ 1.5×. "+memoryWhy+"\n", got)

	met := spliceGoals(got, [][4]string{{k100, "≤ 1.5×", "1.20×", "met"}, {m1, "≤ 1.5×", "1.30×", "met"}})
	require.NotContains(t, met, "- "+m1)
	require.Contains(t, met, "| "+m1+" | ≤ 1.5× | 1.30× | met |\n| b |")
}
