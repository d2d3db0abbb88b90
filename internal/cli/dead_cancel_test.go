package cli_test

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

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
			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
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
