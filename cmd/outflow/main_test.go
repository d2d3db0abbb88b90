package main_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// descendants lists every process below pid, from /proc.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	parent := map[int]int{}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			parent[p], _ = strconv.Atoi(fields[1])
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		next := frontier[0]
		frontier = frontier[1:]
		for child, par := range parent {
			if par == next {
				out = append(out, child)
				frontier = append(frontier, child)
			}
		}
	}
	return out
}

func TestLocal_CtrlCStopsEveryProcessItStarted(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "outflow")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	cmd := exec.Command(bin, "local", "--no-demo", "--template", "../../template.yaml")
	cmd.Dir = "."
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "running until Ctrl-C") {
				close(ready)
				for sc.Scan() {
				}
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("outflow local did not get ready")
	}
	children := descendants(t, cmd.Process.Pid)
	require.NotEmpty(t, children, "the moto server runs under outflow local")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "Ctrl-C is a clean stop")
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("outflow local did not stop on Ctrl-C")
	}
	for _, pid := range children {
		require.Eventually(t, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }, 5*time.Second, 50*time.Millisecond,
			"child %d is gone", pid)
	}
}

// TestLocal_SweepPartitionsRunsTheDemoOnTwoPartitions is `make run
// ARGS=--sweep-partitions=2`: the demo passes, the banner says how the
// backstop is split, and the report counts sweeps of both partitions.
func TestLocal_SweepPartitionsRunsTheDemoOnTwoPartitions(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "outflow")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	out, err = exec.Command(bin, "local", "--sweep-partitions", "2", "--template", "../../template.yaml").CombinedOutput()
	require.NoError(t, err, string(out))
	text := string(out)
	require.Contains(t, text, "in-process functions, 2 sweep partitions over 4 shards")
	require.Contains(t, text, "OK: every row was delivered or dead-lettered as staged")
	line := regexp.MustCompile(`(?m)^sweeps by partition: 0/2: [1-9][0-9]*, 1/2: [1-9][0-9]*$`).FindString(text)
	require.NotEmpty(t, line, "both partitions swept:\n%s", text)
}

// TestLocal_TableNamesTheTableAndTheFirstLineSaysWhatTheTemplateCreated:
// --table names the outbox table (it was ignored: each run made a new
// name), and the first line says the template created no queues, topics
// or event buses where it created none, not "0 queues, 0 topics, 0 event
// buses".
func TestLocal_TableNamesTheTableAndTheFirstLineSaysWhatTheTemplateCreated(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "outflow")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	cmd := exec.Command(bin, "local", "--no-demo", "--table", "my-outbox", "--template", "../../template.yaml",
		"--param", "ExampleTargets=false", "--param", "Routes=orders=http://127.0.0.1:1/000000000000/orders")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		if sc.Scan() {
			first <- sc.Text()
		}
		for sc.Scan() {
		}
	}()
	select {
	case line := <-first:
		require.Regexp(t, `^outflow local: endpoint http://127\.0\.0\.1:\d+, table my-outbox, the template created no queues, topics or event buses, in-process functions, ready in `, line)
	case <-time.After(60 * time.Second):
		t.Fatal("outflow local did not get ready")
	}
}
