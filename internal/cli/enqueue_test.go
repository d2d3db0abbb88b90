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
