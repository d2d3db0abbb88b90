package cli_test

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/cli"
)

// Review 17c: a redrive or purge cancelled part way stops, says so, and
// reports no more done than it did.
func TestDeadBulk_StopsOnCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		re   string
		done string // status of a row done
	}{
		{"redrive", []string{"dead", "redrive", "--all"}, `redriven (\d+), skipped (\d+)`, "pending"},
		{"purge", []string{"dead", "purge", "--all", "--yes"}, `purged (\d+), skipped (\d+)`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedDead(t, 300, 16<<10)
			// Cancelled at the 50th write, counted through a proxy, not
			// timed: a fast machine cannot finish first, nor a slow one
			// be cancelled before it has begun.
			const cancelAt = 50
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var writes atomic.Int64
			e.proxyAWS(t, func(op string, _ []byte) {
				if (strings.HasSuffix(op, ".UpdateItem") || strings.HasSuffix(op, ".DeleteItem")) && writes.Add(1) == cancelAt {
					cancel()
				}
			})
			var out, errb bytes.Buffer
			code := cli.Execute(ctx, tt.args, &out, &errb, func(k string) string { return e.vars[k] })
			require.NotEqual(t, cli.ExitOK, code, "stdout %s stderr %s", out.String(), errb.String())
			require.Contains(t, errb.String(), "context")
			m := regexp.MustCompile(tt.re).FindStringSubmatch(out.String())
			require.NotNil(t, m, out.String())
			n, _ := strconv.Atoi(m[1])
			sk, _ := strconv.Atoi(m[2])
			require.Zero(t, sk)
			actual := 0
			for i := range 300 {
				if string(e.status(t, "dead-"+pad5(i))) == tt.done {
					actual++
				}
			}
			require.GreaterOrEqual(t, writes.Load(), int64(cancelAt), "the run was cancelled before its %dth write", cancelAt)
			require.Less(t, n, 300, "cancelled part way")
			require.LessOrEqual(t, n, actual)
			t.Logf("reported %d, done %d; stderr %d bytes: %.300s", n, actual, errb.Len(), errb.String())
		})
	}
}

func pad5(i int) string {
	s := strconv.Itoa(i)
	for len(s) < 5 {
		s = "0" + s
	}
	return s
}
