package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/capacity"
)

// TestRenderCapacity_IncludesTheOperatorsSectionOnlyWhenItsFileExists
// renders a report twice: without docs/capacity-operators.md the section
// says how to make it; with it, the file's sections stand in its place.
func TestRenderCapacity_IncludesTheOperatorsSectionOnlyWhenItsFileExists(t *testing.T) {
	t.Parallel()
	rep := capacity.Report{Rows: 1000, RowBudget: 10000, ShardCeiling: 1000, SweepRateS: 60, DeadlineMarginS: 10,
		Drains: []capacity.DrainCase{{Name: "k=1", DrainResult: capacity.DrainResult{Seconds: 120}}, {Name: "k=16", DrainResult: capacity.DrainResult{Seconds: 10}}}}
	dir := t.TempDir()
	doc := renderCapacity(rep, dir)
	require.Contains(t, doc, "`go run ./cmd/outflow-bench -only operators`")
	require.Contains(t, doc, "**12.0×**")

	ops := "# Operator tools at scale\n\n### outflow stats over a million rows\n\nmeasured.\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "capacity-operators.md"), []byte(ops), 0o644))
	doc = renderCapacity(rep, dir)
	require.NotContains(t, doc, "-only operators")
	require.Contains(t, doc, "## Operator tools at scale\n\n### outflow stats over a million rows\n\nmeasured.")
	require.Equal(t, 1, strings.Count(doc, "Operator tools at scale"), "the included file's own title is dropped")
}

// TestNum_WritesThousandsSeparators checks the docs' number format.
func TestNum_WritesThousandsSeparators(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1000000: "1,000,000", -12345: "-12,345"} {
		require.Equal(t, want, num(n))
	}
}
