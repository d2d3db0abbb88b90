package interop_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/child"
)

// line is one JSON line a producer or consumer process prints on stdout.
// Producers print ready, then staged and races. Consumers print ready,
// then a line for each outcome their poller reports (once per message per
// delivery, before the poller deletes it): the outcome, and the message's
// key, group, place, closed and redriven (and why, for any outcome but
// applied and closed); and, when their stdin closes, done with their
// counts.
type line struct {
	Ready  bool        `json:"ready"`
	Staged []stagedRow `json:"staged"`
	Races  int         `json:"races"`

	Outcome  string `json:"outcome,omitempty"`
	Key      string `json:"key,omitempty"`
	Group    string `json:"group,omitempty"`
	Seq      int64  `json:"seq,omitempty"`
	Closed   string `json:"closed,omitempty"`
	Redriven bool   `json:"redriven,omitempty"`
	Error    string `json:"error,omitempty"`

	Done   bool           `json:"done,omitempty"`
	Counts map[string]int `json:"counts,omitempty"`
}

// stagedRow is a row a producer staged, in the producer's commit order.
type stagedRow struct {
	Key   string `json:"key"`
	Group string `json:"group"`
}

// event is what a process said: a line of its stdout, or its end (eof:
// its stdout closed, and it exited). partial is a last line cut short (no
// newline): what a process killed mid-write leaves.
type event struct {
	from    *proc
	line    line
	raw     string
	partial bool
	eof     bool
}

// proc is a producer or consumer in another language, run as a child
// process in its own process group (killed at the test's end if still
// running). It is started ("go") and stopped (stdin closed) through its
// stdin; its stderr is kept for a failure's message.
type proc struct {
	name   string
	cmd    *exec.Cmd
	child  *child.Process
	stdin  io.WriteCloser
	stderr *awstest.SyncBuffer
	// stdin is closed once; closeOnce guards it.
	closeOnce sync.Once
}

// spawn runs argv with env added to this process's environment, sending
// every line it prints, and its end, to events.
func spawn(t *testing.T, name string, argv []string, env []string, events chan<- event) *proc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = filepath.Join("testdata")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("%s: stdin: %v", name, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("%s: stdout: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, stdin: stdin, stderr: &awstest.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = w, p.stderr
	p.child, err = child.Start(cmd)
	_ = w.Close() // the child has its copy
	if err != nil {
		_ = r.Close()
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { p.stop() })
	go func() {
		defer r.Close()
		br := bufio.NewReaderSize(r, 64*1024)
		for {
			b, err := br.ReadBytes('\n')
			if len(b) > 0 {
				ev := event{from: p, raw: strings.TrimRight(string(b), "\n"), partial: b[len(b)-1] != '\n'}
				if err := json.Unmarshal(b, &ev.line); err != nil {
					ev.line = line{}
				}
				events <- ev
			}
			if err != nil {
				break
			}
		}
		<-p.child.Exited()
		events <- event{from: p, eof: true}
	}()
	return p
}

// send writes a line to the process's stdin.
func (p *proc) send(s string) error {
	if _, err := io.WriteString(p.stdin, s+"\n"); err != nil {
		return fmt.Errorf("%s: write %q to stdin: %w", p.name, s, err)
	}
	return nil
}

// close closes the process's stdin: a consumer's signal to stop.
func (p *proc) close() { p.closeOnce.Do(func() { _ = p.stdin.Close() }) }

// kill SIGKILLs the process: a crash, with no chance to finish or say
// anything. (Its group holds no other process: Python, Node and the Go
// consumer run their work on threads.)
func (p *proc) kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("%s: SIGKILL: %w", p.name, err)
	}
	return nil
}

// stop ends the process group if it still runs.
func (p *proc) stop() {
	p.close()
	p.child.Stop(5 * time.Second)
}

// exit describes how the process ended, once it has.
func (p *proc) exit() string {
	select {
	case <-p.child.Exited():
	default:
		return "still running"
	}
	if st := p.cmd.ProcessState; st != nil {
		return st.String()
	}
	return "ended"
}

// ok reports whether the process exited with status 0.
func (p *proc) ok() bool {
	select {
	case <-p.child.Exited():
		return p.cmd.ProcessState != nil && p.cmd.ProcessState.Success()
	default:
		return false
	}
}

// report is the process's stderr, its last lines if long, for a
// failure's message.
func (p *proc) report() string {
	return fmt.Sprintf("%s (%s), stderr:\n%s", p.name, p.exit(), tail(p.stderr.String(), 60))
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
