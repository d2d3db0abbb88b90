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

// progress draws a one-line progress count on w while a bulk command
// runs (how many there are is not known until the dead index has been
// read to its end) and a full bar when it is done.
type progress struct {
	w     io.Writer
	label string
	done  int
}

func (p *progress) step() {
	p.done++
	if p.done%100 == 0 {
		fmt.Fprintf(p.w, "\r%s %d", p.label, p.done)
	}
}

// finish draws the full bar, for more than one row.
func (p *progress) finish() {
	if p.done > 1 {
		fmt.Fprintf(p.w, "\r%s [%s] %d/%d\n", p.label, strings.Repeat("#", 30), p.done, p.done)
	}
}
