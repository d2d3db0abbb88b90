package docs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// comparisonHeading opens the README's comparison with EventBridge Pipes
// and a plain stream function, whose cost figures docs/cost.md states.
const comparisonHeading = "## Why not EventBridge Pipes or a plain stream function?"

// costCell names one cell of docs/cost.md: the table under a heading, its
// row (by its first cell) and its column (by its header).
type costCell struct{ table, row, column string }

// comparisonFigures are the figures the README's comparison section
// quotes, in the order it quotes them, each with the cell of docs/cost.md
// it quotes. All of them stage with `Put` and send to an SQS standard
// queue, as the section's table says, except the `TransactItem` line's,
// which the prose names.
var comparisonFigures = []costCell{
	// The table's row: dollars per million messages.
	{"Dollars per million messages", "total", "Outflow, wake"},
	{"Dollars per million messages", "total", "Outflow, sweep"},
	{"Dollars per million messages", "total", "Outflow, lean"},
	{"Dollars per million messages", "total", "EventBridge Pipes relay"},
	// Write units per message: the relay's, then Outflow's, table and
	// index; lean's none on the index.
	{"What each path uses per message", "write units, table", "EventBridge Pipes relay"},
	{"What each path uses per message", "write units, due index", "EventBridge Pipes relay"},
	{"What each path uses per message", "write units, table", "Outflow, wake"},
	{"What each path uses per message", "write units, due index", "Outflow, wake"},
	{"What each path uses per message", "write units, table", "Outflow, sweep"},
	{"What each path uses per message", "write units, due index", "Outflow, sweep"},
	{"What each path uses per message", "write units, table", "Outflow, lean"},
	{"What each path uses per message", "write units, due index", "Outflow, lean"},
	// SQS requests per message.
	{"What each path uses per message", "SQS requests", "Outflow, wake"},
	{"What each path uses per message", "SQS requests", "Outflow, sweep"},
	{"What each path uses per message", "SQS requests", "EventBridge Pipes relay"},
	// Staged inside the business transaction.
	{"Staging in the business transaction", "Outflow, wake", "dollars, `TransactItem`"},
	{"Staging in the business transaction", "Outflow, sweep", "dollars, `TransactItem`"},
	{"Staging in the business transaction", "Outflow, lean", "dollars, `TransactItem`"},
	{"Staging in the business transaction", "EventBridge Pipes relay", "dollars, `TransactItem`"},
	// The naive loop.
	{"Dollars per million messages", "total", "naive one-at-a-time loop"},
}

// TestReadme_ComparisonQuotesEveryCostFigureFromDocsCost reads the README's
// comparison section against docs/cost.md, which `make bench` writes: every
// dollar and per-message figure it quotes must be the one docs/cost.md
// states in the cell comparisonFigures names, so that the columns compare
// like with like and a rerun of the bench that changes a figure fails here
// until the README follows.
func TestReadme_ComparisonQuotesEveryCostFigureFromDocsCost(t *testing.T) {
	t.Parallel()
	readme, cost := readRepoFile(t, "README.md"), readRepoFile(t, "docs/cost.md")
	s := section(readme, comparisonHeading)
	require.NotEmpty(t, s, "README.md has no section %q", comparisonHeading)
	require.Contains(t, s, "`Put` staging", "the section names the staging mode its table's figures share")
	require.Len(t, figure.FindAllString(s, -1), 20, "the section quotes 20 figures: 4 in its table, 16 in its prose")
	require.NoError(t, checkFigures(s, cost, comparisonFigures))
}

// TestDocsCost_LeanWritesNoDueIndexAndMeetsItsGoal reads the lean path's
// figures in docs/cost.md: its rows are staged and settled outside the due
// index, and a million messages to an SQS standard queue with `Put`
// staging cost at most its goal, $1.45.
func TestDocsCost_LeanWritesNoDueIndexAndMeetsItsGoal(t *testing.T) {
	t.Parallel()
	tables := costTables(readRepoFile(t, "docs/cost.md"))
	uses := tables["What each path uses per message"]
	require.Equal(t, "0.00", uses["write units, due index"]["Outflow, lean"])
	require.Equal(t, "2.00", uses["write units, table"]["Outflow, lean"])
	total := tables["Dollars per million messages"]["total"]["Outflow, lean"]
	var dollars float64
	_, err := fmt.Sscanf(total, "$%f", &dollars)
	require.NoError(t, err, "lean's total %q", total)
	require.LessOrEqual(t, dollars, 1.45)
	require.Equal(t, total, tables["Staging in the business transaction"]["Outflow, lean"]["dollars, `Put`"])
	require.Contains(t, tables["Dollars per million messages, by target"]["SQS standard queue"]["Outflow, lean"], total+" (")
}

// TestCheckFigures_FailsWhenAQuotedFigureDiffersFromDocsCost feeds the
// check altered texts, so the test above cannot pass by finding nothing:
// a changed, swapped, missing or extra figure, or a changed docs/cost.md,
// is an error.
func TestCheckFigures_FailsWhenAQuotedFigureDiffersFromDocsCost(t *testing.T) {
	t.Parallel()
	readme := section(readRepoFile(t, "README.md"), comparisonHeading)
	cost := readRepoFile(t, "docs/cost.md")
	same := func(s string) string { return s }
	replace := func(old, new string) func(string) string {
		return func(s string) string { return strings.Replace(s, old, new, 1) }
	}
	for _, tc := range []struct {
		name         string
		readme, cost func(string) string
		wantErr      string // empty: no error
	}{
		{"as written", same, same, ""},
		{"a dollar figure altered", replace("$2.60", "$2.61"), same, "figure 1 is $2.61, docs/cost.md states $2.60"},
		{"another staging mode's figure", replace("$2.60 (wake)", "$3.22 (wake)"), same, "figure 1 is $3.22, docs/cost.md states $2.60"},
		{"a per-message figure altered", replace("0.202", "0.205"), same, "figure 13 is 0.205, docs/cost.md states 0.202"},
		{"lean's figure altered", replace("$1.35 (lean)", "$1.36 (lean)"), same, "figure 3 is $1.36, docs/cost.md states $1.35"},
		{"the wake's figure quoted for lean", replace("$1.35 (lean)", "$2.60 (lean)"), same, "figure 3 is $2.60, docs/cost.md states $1.35"},
		{"a figure dropped", replace("costs $3.62", "costs more"), same, "quotes 19 figures"},
		{"a figure added", replace("costs $3.62", "costs $3.62, $1.00 more"), same, "quotes 21 figures"},
		{"no figures at all", func(string) string { return comparisonHeading }, same, "quotes 0 figures"},
		{"docs/cost.md rerun", same, replace("**$2.60**", "**$2.70**"), "figure 1 is $2.60, docs/cost.md states $2.70"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, c := tc.readme(readme), tc.cost(cost)
			err := checkFigures(r, c, comparisonFigures)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.False(t, r == readme && c == cost, "the case alters nothing")
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// figure is a dollar amount or a decimal figure in prose ("$2.60",
// "0.207", "1.00"); whole numbers ("10 rows", "64 KB") are not figures.
var figure = regexp.MustCompile(`\$\d[\d,]*(?:\.\d+)?|\b\d+\.\d+\b`)

// checkFigures reports where text's figures, in order, differ from the
// cells of the cost document want names: a count that differs, a cell the
// document lacks, or a figure that is not its cell's.
func checkFigures(text, costDoc string, want []costCell) error {
	got := figure.FindAllString(text, -1)
	if len(got) != len(want) {
		return fmt.Errorf("the text quotes %d figures, %q, where %d are expected", len(got), got, len(want))
	}
	tables := costTables(costDoc)
	var errs []error
	for i, c := range want {
		v, ok := tables[c.table][c.row][c.column]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("docs/cost.md has no cell %q, row %q, column %q", c.table, c.row, c.column))
		case got[i] != v:
			errs = append(errs, fmt.Errorf("figure %d is %s, docs/cost.md states %s (%q, row %q, column %q)",
				i+1, got[i], v, c.table, c.row, c.column))
		}
	}
	return errors.Join(errs...)
}

// costTables returns md's tables by the heading above them: each row's
// cells by column header, rows by their first cell, emphasis dropped.
func costTables(md string) map[string]map[string]map[string]string {
	out := map[string]map[string]map[string]string{}
	var heading string
	var header []string // the current table's; nil between tables
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case !strings.HasPrefix(line, "|"):
			header = nil
		case header == nil:
			header = cells(line)
		case strings.HasPrefix(line, "| ---"):
		default:
			row := cells(line)
			if out[heading] == nil {
				out[heading] = map[string]map[string]string{}
			}
			byColumn := map[string]string{}
			for i, v := range row {
				if i < len(header) {
					byColumn[header[i]] = v
				}
			}
			out[heading][row[0]] = byColumn
		}
	}
	return out
}

// cells splits a table line into its trimmed cells, without bold marks.
func cells(line string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(strings.ReplaceAll(p, "**", ""))
	}
	return parts
}

// section returns md's section under heading (a "## " heading), up to the
// next one, or "" when md has no such heading.
func section(md, heading string) string {
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		return ""
	}
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return heading + "\n" + rest
}

// readRepoFile returns the repository's file at rel.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(raw)
}
