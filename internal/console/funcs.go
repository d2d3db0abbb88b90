package console

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
)

// funcs are the templates' helpers. Each returns plain text, which
// html/template escapes where it lands.
var funcs = template.FuncMap{
	"when":  when,
	"ago":   func(t time.Time) string { return roundAge(time.Since(t)) },
	"ms":    func(ms int64) string { return roundAge(time.Duration(ms) * time.Millisecond) },
	"count": count,
	"sub":   func(a, b int) int { return a - b },
	"short": short,
	"num":   func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
	// clipped reports whether short cuts s at n: the cell then keeps the
	// whole text in a details element (the console runs no script).
	"clipped": func(s string, n int) bool { return short(s, n) != s },
	// deadOutcome is a dead letter's outcome, from its closed.
	"deadOutcome": func(closed string) operate.Outcome {
		return operate.ListedOutcome(closed, 0)
	},
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// roundAge is an age to a precision a person reads: ms under a second,
// then seconds, minutes, hours.
func roundAge(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	default:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
}

// count is n, or ≥n when it is a lower bound.
func count(n int, atLeast bool) string {
	if atLeast {
		return "≥" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// short cuts s to n runes on one line.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// sortedCounts is m in order: shards as numbers, queues by name.
func sortedCounts(m map[string]*dynamo.Counts, numbers bool) []named {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if numbers {
			return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
		}
		return strings.Compare(a, b)
	})
	out := make([]named, len(keys))
	for i, k := range keys {
		out[i] = named{Name: k, Counts: m[k]}
	}
	return out
}
