// Package child runs helper processes (the moto server, the Lambda
// Runtime Interface Emulator) so that none outlives the process that
// started it: each runs in its own process group, is killed if its parent
// dies, and Stop ends the whole group.
package child

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a started child process group.
type Process struct{ cmd *exec.Cmd }

// Start starts cmd in a new process group that dies with this process.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return &Process{cmd: cmd}, nil
}

// Pid is the process id, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends the group SIGTERM, waits up to grace, then kills it.
func (p *Process) Stop(grace time.Duration) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}

// FindTool returns the value of the environment variable env if it is set,
// else the first dir/rel that exists, for dir the working directory and
// each directory above it: how the project's own installed tools (.venv,
// bin/tools) are found from any package's tests.
func FindTool(env, rel string) (string, bool) {
	if p := os.Getenv(env); p != "" {
		return p, true
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if p := filepath.Join(dir, rel); fileExists(p) {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
