package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/local"
)

// TestDemoReport_PrintsInspectCommandsThatRunFromTheRepositoryRoot: the
// commands the demo suggests after make run (which runs go run
// ./cmd/outflow local) run as printed from the repository root, where no
// outflow need be on the PATH and bin/outflow is there only after make
// cli: go run ./cmd/outflow, with flags and a command the CLI takes.
func TestDemoReport_PrintsInspectCommandsThatRunFromTheRepositoryRoot(t *testing.T) {
	t.Parallel()
	const endpoint, table = "http://127.0.0.1:40447", "outflow-bu3h6s-table"
	var out bytes.Buffer
	local.DemoReport{}.Print(&out, endpoint, table, true)
	_, after, found := strings.Cut(out.String(), "inspect the dead letters while it runs, from another shell:\n")
	require.True(t, found, out.String())
	var printed []string
	for line := range strings.Lines(after) {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		printed = append(printed, strings.TrimSpace(line))
	}
	const run = "go run ./cmd/outflow"
	base := run + " --endpoint " + endpoint + " --table " + table
	tests := []struct {
		name, command string
	}{
		{"the dead letters", base + " dead list"},
		{"the broken route's dead letter", base + " dead show demo-audit-1"},
		{"a redrive of them all", base + " dead redrive --all"},
	}
	require.Len(t, printed, len(tests), out.String())
	_, err := os.Stat(filepath.Join("..", "..", strings.TrimPrefix(run, "go run "), "main.go"))
	require.NoError(t, err, "%s runs from the repository root", run)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.command, printed[i])
			// The flags and the command are the CLI's own: asked for
			// help, it parses them and exits 0.
			args := append(strings.Fields(strings.TrimPrefix(tt.command, run)), "--help")
			var stdout, stderr bytes.Buffer
			code := cli.Execute(context.Background(), args, &stdout, &stderr, func(string) string { return "" })
			require.Equal(t, cli.ExitOK, code, stderr.String())
		})
	}
}

// TestDemoReport_WithoutKeepSaysHowToKeepTheStackInsteadOfCommands: a run
// without --keep stops its stack as it ends, so commands for its endpoint
// and table would find nothing: the report says so, and how to run it to
// inspect the dead letters (under make run, make run ARGS=--keep).
func TestDemoReport_WithoutKeepSaysHowToKeepTheStackInsteadOfCommands(t *testing.T) {
	t.Parallel()
	const endpoint, table = "http://127.0.0.1:40447", "outflow-bu3h6s-table"
	var out bytes.Buffer
	local.DemoReport{}.Print(&out, endpoint, table, false)
	require.NotContains(t, out.String(), endpoint, "no command for an endpoint that is gone")
	require.NotContains(t, out.String(), " dead list\n")
	require.Contains(t, out.String(), "the stack stops with this run, its dead letters with it: to inspect them (outflow dead list, show, redrive), "+
		"run make run ARGS=--keep,\nwhich keeps it running after the demo and prints the commands for its endpoint and table\n")
}
