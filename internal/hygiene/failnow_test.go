package hygiene_test

import (
	"go/parser"
	"go/token"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/hygiene"
)

// No test in the repository stops itself from a goroutine other than its
// own: FailNow there ends only that goroutine, so the test runs on past a
// failed check, or the process panics. go vet's testinggoroutine sees only
// t.Fatal in a go statement's literal; this sees require.* too, and the
// Go, AfterFunc, Eventually and HandlerFunc forms (see
// hygiene.FailNowOffTestGoroutine for what it cannot see).
func TestRepository_NoTestStopsFromAnotherGoroutine(t *testing.T) {
	t.Parallel()
	findings, err := hygiene.FailNowOffTestGoroutineIn("../..")
	require.NoError(t, err)
	var bad []string
	for _, f := range findings {
		bad = append(bad, f.String())
	}
	require.Empty(t, bad)
}

func TestFailNowOffTestGoroutine_RefusesEachFormItNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		body string
		want string // "" when nothing is found
	}{
		{"go statement, require", `go func() { require.NoError(t, err) }()`, "require.NoError in a function run by go"},
		{"go statement, t.Fatal", `go func() { t.Fatal(err) }()`, "t.Fatal in a function run by go"},
		{"WaitGroup.Go", `wg.Go(func() { require.Equal(t, 1, n) })`, "require.Equal in a function run by Go"},
		{"errgroup Go, t.FailNow", `g.Go(func() error { t.FailNow(); return nil })`, "t.FailNow in a function run by Go"},
		{"AfterFunc", `time.AfterFunc(d, func() { require.NoError(t, err) })`, "require.NoError in a function run by AfterFunc"},
		{"Eventually condition", `require.Eventually(t, func() bool { require.NoError(t, err); return true }, d, d)`, "require.NoError in a function run by Eventually"},
		{"test server handler", `http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { require.NoError(t, err) })`, "require.NoError in a function run by HandlerFunc"},
		{"nested in the goroutine", `go func() { func() { require.True(t, ok) }() }()`, "require.True in a function run by go"},
		{"control: in the test's goroutine", `require.NoError(t, err)`, ""},
		{"control: t.Run", `t.Run("x", func(t *testing.T) { require.NoError(t, err) })`, ""},
		{"control: EventuallyWithT's CollectT", `require.EventuallyWithT(t, func(c *assert.CollectT) { require.NoError(c, err) }, d, d)`, ""},
		{"control: assert in a goroutine", `go func() { assert.NoError(t, err) }()`, ""},
		{"control: errors collected", `wg.Go(func() { errs <- err })`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x_test.go", "package x\nfunc TestX(t *testing.T) {\n"+tc.body+"\n}\n", 0)
			require.NoError(t, err)
			var got []string
			for _, f := range hygiene.FailNowOffTestGoroutine(fset, f) {
				got = append(got, f.String())
			}
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.Contains(t, got[0], tc.want)
		})
	}
}
