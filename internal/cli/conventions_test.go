package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
)

func TestExecute_RefusesUnknownCommandsAndFlagsOnOneLineWithExit2(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"stat"}, `outflow: unknown command "stat"; did you mean "stats"?`},
		{[]string{"dead", "lst"}, `outflow: unknown command "lst" for "outflow dead"; did you mean "list"?`},
		{[]string{"dead", "frobnicate"}, `outflow: unknown command "frobnicate" for "outflow dead"`},
		{[]string{"sweep", "--bogus"}, `outflow: unknown flag --bogus for "outflow sweep"`},
		{[]string{"sweep", "--tabel", "t"}, `outflow: unknown flag --tabel for "outflow sweep"; did you mean "--table"?`},
		{[]string{"dead", "list", "--sinse", "1d"}, `outflow: unknown flag --sinse for "outflow dead list"; did you mean "--since"?`},
		{[]string{"dead", "purge", "--all", "--yes", "--older-than", "7x"},
			`outflow: invalid argument "7x" for "--older-than" flag: invalid duration "7x": want a number and unit, e.g. 90s, 15m, 12h, 7d or 1d12h`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			e := &env{vars: map[string]string{}}
			r := e.run(t, tt.args...)
			require.Equal(t, cli.ExitUsage, r.code)
			require.Equal(t, tt.want+"\n", r.stderr, "one line, no help")
			require.Empty(t, r.stdout)
		})
	}
}

func TestExecute_AGroupWithNoCommandPrintsItsHelp(t *testing.T) {
	t.Parallel()
	e := &env{vars: map[string]string{}}
	for _, args := range [][]string{nil, {"dead"}} {
		r := e.run(t, args...)
		require.Equal(t, cli.ExitOK, r.code)
		require.Contains(t, r.stdout, "Available Commands:")
	}
}

func TestDurationFlags_TakeDays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.deadLetters(t, "ghost", 2)

	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "list", "--since", "1d", "--output", "json")), &listed))
	require.Len(t, listed, 2, "dead within the last day")

	require.Contains(t, e.ok(t, "dead", "purge", "--queue", "ghost", "--older-than", "1d12h", "--yes"), "purged 0",
		"none is a day and a half old")
	require.Contains(t, e.ok(t, "dead", "redrive", "--all", "--dry-run"), keys[0], "still there")
	require.Equal(t, cli.ExitUsage, e.run(t, "dead", "list", "--since", "-1d").code, "negative")
}

func TestErrors_NameTheTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := `table "nosuch": not found in region us-east-1 at endpoint ` + awstest.Endpoint() + ` (ResourceNotFoundException)`
	for _, args := range [][]string{
		{"stats"},
		{"dead", "list"},
		{"dead", "show", "k1"},
		{"enqueue", "--queue", "orders", "--body", "x"},
	} {
		r := e.run(t, append(args, "--table", "nosuch")...)
		require.Equal(t, cli.ExitError, r.code, "outflow %v", args)
		require.Contains(t, r.stderr, want, "outflow %v", args)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
	}
	// The endpoint is real: only the table is wrong.
	require.Equal(t, awstest.Endpoint(), e.vars["AWS_ENDPOINT_URL"])
}

func TestDeadShow_JSONKeysAreSnakeCaseInTheHistoryToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deadLetters(t, "ghost", 1)

	var shown struct {
		Errors []map[string]any `json:"errors"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "show", "ghost-0000", "--output", "json")), &shown))
	require.Len(t, shown.Errors, 1)
	for _, k := range []string{"at", "attempt", "message", "unsure"} {
		require.Contains(t, shown.Errors[0], k)
	}
	require.Contains(t, shown.Errors[0]["message"], `no route for queue "ghost"`)
}
