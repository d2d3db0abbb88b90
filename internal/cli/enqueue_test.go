package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/cli"
)

// enqueue reads OUTFLOW_ROUTES from the dispatcher's environment; it must
// read the dispatcher's OUTFLOW_MAX_MESSAGE_BYTES from it too, or it stages
// rows the dispatcher dead-letters as too large and refuses rows it sends.
func TestEnqueue_ChecksSizeAgainstTheDispatchersMaxMessageBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		maxBytes string
		body     int
		code     int
	}{
		{"a 100 KiB row over a 64 KiB limit is refused", "65536", 100 * 1024, cli.ExitError},
		{"a 300 000-byte row under a 390 000-byte limit is staged", "390000", 300000, cli.ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.vars["OUTFLOW_MAX_MESSAGE_BYTES"] = tt.maxBytes
			f := t.TempDir() + "/body.txt"
			require.NoError(t, os.WriteFile(f, []byte(strings.Repeat("x", tt.body)), 0o600))
			r := e.run(t, "enqueue", "--queue", "orders", "--body-file", f)
			require.Equal(t, tt.code, r.code, r.stderr)
		})
	}
}

// Whether a row takes a group is its route's name's to say (.fifo): a
// FIFO route without --group, or --group on a route that is not FIFO, is
// a mistake in the call (exit 2, as an empty body is), not a row the
// table refused, and no row is staged.
func TestEnqueue_AGroupMissingOnAFIFORouteOrGivenToAnotherIsBadUsage(t *testing.T) {
	t.Parallel()
	const routes = "orders=http://localhost:1/000000000000/orders,events.fifo=http://localhost:1/000000000000/events.fifo," +
		"domain=bus?source=app&detail-type=T"
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a FIFO route without a group", []string{"--queue", "events.fifo", "--body", "x"}, cli.ExitUsage,
			`--group is required: route "events.fifo" is FIFO, and a FIFO queue needs a message group`},
		{"a FIFO route with an empty group", []string{"--queue", "events.fifo", "--body", "x", "--group", ""}, cli.ExitUsage,
			"--group is required"},
		{"a standard queue's route with a group", []string{"--queue", "orders", "--body", "x", "--group", "g1"}, cli.ExitUsage,
			`--group "g1": route "orders" is not FIFO (its name does not end in .fifo), and only a FIFO queue or topic has message groups; drop --group`},
		{"a bus's route with a group", []string{"--queue", "domain", "--body", "{}", "--group", "g1"}, cli.ExitUsage,
			`route "domain" is not FIFO`},
		{"a FIFO route with a group", []string{"--queue", "events.fifo", "--body", "x", "--group", "g1"}, cli.ExitOK, ""},
		{"a standard queue's route without a group", []string{"--queue", "orders", "--body", "x"}, cli.ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			r := e.run(t, append([]string{"enqueue", "--routes", routes, "--key", "try-1"}, tt.args...)...)
			require.Equal(t, tt.code, r.code, r.stderr)
			if tt.code == cli.ExitOK {
				return
			}
			require.Contains(t, r.stderr, tt.want)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
			row, err := e.store.Get(t.Context(), "try-1")
			require.NoError(t, err)
			require.Nil(t, row, "nothing staged")
		})
	}
}
