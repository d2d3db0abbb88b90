package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLocal_PrintsTheExportsYourOwnProcessNeeds is `make run ARGS=--keep`
// for a newcomer's own app (testdata/app, the SDK's default config and
// the producer): the export lines it prints, pasted into a shell whose
// environment has nothing of AWS (no credentials, no region, no ~/.aws),
// are enough to stage rows that the stack delivers, on a plain route, an
// ordered FIFO one and an EventBridge one.
func TestLocal_PrintsTheExportsYourOwnProcessNeeds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, app := filepath.Join(dir, "outflow"), filepath.Join(dir, "app")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	out, err = exec.Command("go", "build", "-o", app, "./testdata/app").CombinedOutput()
	require.NoError(t, err, string(out))

	cmd := exec.Command(bin, "local", "--no-demo", "--template", "../../template.yaml")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	lines := make(chan []string, 1)
	go func() {
		var exports []string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "export ") {
				exports = append(exports, sc.Text())
				if strings.HasPrefix(sc.Text(), "export OUTFLOW_SHARDS=") {
					lines <- exports
					for sc.Scan() {
					}
					return
				}
			}
		}
		close(lines)
	}()
	var exports []string
	select {
	case exports = <-lines:
	case <-time.After(90 * time.Second):
		t.Fatal("outflow local printed no exports")
	}
	require.NotEmpty(t, exports, "outflow local stopped before printing its exports")
	names := make([]string, len(exports))
	for i, l := range exports {
		names[i], _, _ = strings.Cut(strings.TrimPrefix(l, "export "), "=")
	}
	require.Equal(t, []string{"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"OUTFLOW_TABLE", "OUTFLOW_ROUTES", "OUTFLOW_ORDERED", "OUTFLOW_SHARDS"}, names)

	// A shell with the pasted lines and nothing else of AWS runs a
	// program.
	home := t.TempDir()
	shell := func(program string, args ...string) string {
		t.Helper()
		script := strings.Join(exports, "\n") + "\n" + `exec "$0" "$@"`
		c := exec.Command("sh", append([]string{"-c", script, program}, args...)...)
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s %v: %s", filepath.Base(program), args, out)
		return string(out)
	}
	// The routes arrive whole (an EventBridge route's options hold ? and
	// &), and so do the ordered routes: the app stages on each.
	require.Equal(t, 3, strings.Count(shell(app, "orders", "events.fifo:g1", "domain"), "staged "))
	user := func(args ...string) string { t.Helper(); return shell(bin, args...) }

	// The stack delivers them: nothing is left pending, due or failed.
	var st struct {
		Total struct{ Pending, Due, Claimed, Failed int } `json:"total"`
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		require.NoError(t, json.Unmarshal([]byte(user("stats", "--exact", "--output", "json")), &st))
		if st.Total.Pending+st.Total.Due+st.Total.Claimed+st.Total.Failed == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "rows left undelivered: %+v", st.Total)
		time.Sleep(500 * time.Millisecond)
	}
}
