// Package moto runs the moto server — one process that speaks DynamoDB,
// DynamoDB Streams and SQS — from the project virtualenv, on a free
// loopback port, in its own process group, so nothing outlives its parent.
// It starts moto through server.py, which makes DynamoDB item writes atomic
// as they are in DynamoDB (moto alone lets two concurrent conditional
// writes to one item both succeed), and cloudformation.py, which lets
// moto's CloudFormation create every resource type Outflow's stack has.
package moto

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/outflowhq/outflow/internal/child"
)

// Server is a running moto server.
type Server struct {
	// URL is its endpoint, http://127.0.0.1:PORT.
	URL  string
	proc *child.Process
}

// Path finds the Python that has moto installed: $OUTFLOW_MOTO_PYTHON,
// else the project virtualenv (.venv/bin/python in the working directory
// or above it).
func Path() (string, error) {
	if p := os.Getenv("OUTFLOW_MOTO_PYTHON"); p != "" {
		return p, nil
	}
	if p, ok := child.FindTool("", filepath.Join(".venv", "bin", "moto_server")); ok {
		return filepath.Join(filepath.Dir(p), "python"), nil // the virtualenv that has moto
	}
	return "", errors.New("moto is not installed. In Outflow's repository, `make venv-moto` installs it into .venv " +
		"(make run and make test do too), found from there. Anywhere else (the CLI from a release archive, say), install the moto " +
		"Outflow is tested with into a virtualenv of its own and name its python: " +
		"python3 -m venv ~/.outflow-moto && ~/.outflow-moto/bin/pip install '" + Requirement + "' && " +
		"export OUTFLOW_MOTO_PYTHON=~/.outflow-moto/bin/python")
}

// Requirement is the moto Outflow's server patches are written for and
// tested with: requirements-moto.txt pins the same (a test ties them).
const Requirement = "moto[server,cloudformation]==5.2.5"

// launcher is server.py: moto_server with atomic item writes.
//
//go:embed server.py
var launcher string

// cloudFormation is cloudformation.py: the resource types and properties
// Outflow's stack needs that moto's CloudFormation lacks. It runs before
// the launcher, in the same interpreter.
//
//go:embed cloudformation.py
var cloudFormation string

// Start starts a moto server on a free loopback port and waits until it
// answers. It runs in its own process group and dies with its parent.
//
// The port is never released between choosing it and moto serving on it:
// moto inherits the listening socket (server.py serves on the descriptor
// in OUTFLOW_MOTO_FD), so no other process can take it meanwhile. It is
// ready when it answers on that socket while still running.
func Start(ctx context.Context) (*Server, error) { return StartOn(ctx, "0") }

// StartOn is Start on the given loopback port ("0": a free one), for a
// server that other processes are told to reach (outflow moto --port).
func StartOn(ctx context.Context, port string) (*Server, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	ln, port, err := child.ListenOn(port)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "-c", cloudFormation+"\n"+launcher, "-H", "127.0.0.1", "-p", port)
	cmd.ExtraFiles = []*os.File{ln} // descriptor 3
	cmd.Env = append(os.Environ(), "OUTFLOW_MOTO_FD=3")
	if os.Getenv("OUTFLOW_MOTO_LOG") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	proc, err := child.Start(cmd)
	// moto has its own copy once started; ours closed, a moto that died
	// leaves connections refused rather than queued on a socket nobody serves.
	_ = ln.Close()
	if err != nil {
		return nil, err
	}
	m := &Server{URL: "http://127.0.0.1:" + port, proc: proc}
	// Connections queue on the socket until moto serves, so one try can
	// wait through moto's start; the timeout only bounds a hung one. Its
	// start is seconds of CPU (importing moto): on 2 cores shared with
	// other suites it took over 30 s, so the bound is generous.
	client := &http.Client{Timeout: 5 * time.Second}
	err = proc.WaitReady(ctx, 2*time.Minute, 50*time.Millisecond, func() error {
		resp, err := client.Get(m.URL + "/moto-api/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if err != nil {
		m.Stop()
		return nil, fmt.Errorf("moto server on port %s: %w", port, err)
	}
	return m, nil
}

// Stop ends the server and every process it started.
func (m *Server) Stop() {
	m.proc.Stop(5 * time.Second)
}

// Pid is the server's process id (and process group).
func (m *Server) Pid() int { return m.proc.Pid() }
