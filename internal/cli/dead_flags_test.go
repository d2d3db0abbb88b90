package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/cli"
)

// Review 17c: flags the operator tools take.
func TestDeadAndStats_RefuseOrHandleExtremeFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.deadLetters(t, "ghost", 2)
	tests := []struct {
		name string
		args []string
		// usage: the command must refuse with a usage error naming this;
		// empty: it must succeed.
		usage string
	}{
		{"list --limit negative", []string{"dead", "list", "--limit", "-1"}, "--limit"},
		// The largest int is "no cap" in all but name: cap+1 overflows and
		// the count asks DynamoDB for a Limit below 1.
		{"stats --cap at the largest int counts", []string{"stats", "--cap", "9223372036854775807", "--queues", "ghost"}, ""},
		// A negative age is ignored (olderThan > 0), so the purge below
		// would delete every dead letter of the queue, not none.
		{"purge --older-than negative", []string{"dead", "purge", "--queue", "ghost", "--older-than", "-720h", "--yes"}, "--older-than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run(t, tt.args...)
			if tt.usage == "" {
				require.Equal(t, cli.ExitOK, r.code, "stderr: %s", r.stderr)
				return
			}
			require.Equal(t, cli.ExitUsage, r.code, "stdout: %s stderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tt.usage)
		})
	}
	for _, k := range keys {
		require.Equal(t, "failed", string(e.status(t, k)), "%s: purged by a negative --older-than", k)
	}
}
