package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// emit writes v as JSON with --output json, else calls table with a
// tab-aligned writer.
func (a *app) emit(v any, table func(w io.Writer)) error {
	if a.output == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// shorten cuts s to n runes on one line.
func shorten(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// yesOrDash is "yes" for true, "-" for false.
func yesOrDash(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// progress draws a one-line progress bar on w.
type progress struct {
	w     io.Writer
	label string
	total int
	done  int
}

func (p *progress) step() {
	p.done++
	if p.total < 20 || p.done%max(1, p.total/100) == 0 || p.done == p.total {
		width := 30
		filled := width * p.done / max(1, p.total)
		fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.done, p.total)
		if p.done == p.total {
			fmt.Fprintln(p.w)
		}
	}
}
