// Package child runs helper processes (the moto server, the Lambda
// Runtime Interface Emulator) so that none outlives the process that
// started it: each runs in its own process group, is killed if its parent
// dies (on Linux), and Stop ends the whole group.
package child

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Process is a started child process group.
type Process struct {
	cmd *exec.Cmd
	// exited is closed once the child has exited (and been reaped).
	exited chan struct{}
	err    error // cmd.Wait's result, set before exited is closed
}

// Start starts cmd in a new process group that dies with this process.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Pid is the process id, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop sends the group SIGTERM, waits up to grace, then kills it.
func (p *Process) Stop(grace time.Duration) {
	p.terminate()
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
		<-p.exited
	}
}

// ErrExited is WaitReady's error when the child exits before it is ready:
// for a child given a port, most often because another process took the
// port first.
var ErrExited = errors.New("child exited before it was ready")

// WaitReady polls ready every interval until it succeeds while the child is
// still running, the child exits, ctx ends or timeout passes. A ready
// answer counts only if the child is alive after it: an answer from a
// process that dies at once (a port it could not bind, answered by whoever
// holds it) is not this child being ready.
func (p *Process) WaitReady(ctx context.Context, timeout, interval time.Duration, ready func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := ready()
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%v; last check: %v)", ErrExited, p.err, err)
		default:
		}
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%v; last check: %v)", ErrExited, p.err, err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		case <-time.After(interval):
		}
	}
}

// Listen opens a TCP listener on a loopback port the kernel picks, as a
// file a child inherits (exec.Cmd.ExtraFiles) and its port. The port is
// never free between this call and the child serving on it, so no other
// process can take it meanwhile, as one could a port found free and
// closed. The caller closes the file once the child has started.
func Listen() (*os.File, string, error) { return ListenOn("0") }

// ListenOn is Listen on the given loopback port ("0": one the kernel
// picks), for a server its user must find at a port they chose.
func ListenOn(port string) (*os.File, string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, "", fmt.Errorf("listen on loopback port %s: %w", port, err)
	}
	defer l.Close() // f is a duplicate, and stays open
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		return nil, "", fmt.Errorf("listener file: %w", err)
	}
	_, port, _ = net.SplitHostPort(l.Addr().String())
	return f, port, nil
}

// FreePort returns a loopback TCP port that was free a moment ago. Another
// process may take it before the child binds it: a caller that cannot hand
// the child a listener (Listen) starts the child again on a new port when
// WaitReady reports ErrExited.
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
