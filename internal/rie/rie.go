// Package rie runs a built Lambda bootstrap under the AWS Lambda Runtime
// Interface Emulator — the same runtime API sam local uses — on the host,
// and invokes it over HTTP.
package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/outflowhq/outflow/internal/child"
)

// Emulator is one running emulator with its bootstrap.
type Emulator struct {
	// URL is the invoke endpoint.
	URL  string
	proc *child.Process
}

// Path finds aws-lambda-rie: $OUTFLOW_RIE, else bin/tools/aws-lambda-rie in
// the working directory or above it (where make tools puts it).
func Path() (string, error) {
	if p, ok := child.FindTool("OUTFLOW_RIE", filepath.Join("bin", "tools", "aws-lambda-rie")); ok {
		return p, nil
	}
	return "", errors.New("aws-lambda-rie not found: run `make tools` (make test depends on it)")
}

// Start runs bootstrap under the emulator with env (plus PATH) on free
// loopback ports, with logs to logs (nil discards). The emulator starts
// the bootstrap on the first invoke, so init time is part of that call.
//
// The emulator binds the ports itself, so another process can take one
// between FreePort and its bind: the emulator then exits, and Start tries
// again on new ports. It is ready when it listens on both ports itself
// (child.Listening) while it is still running.
func Start(rieBinary, bootstrap string, env []string, logs io.Writer) (*Emulator, error) {
	var err error
	for range 5 {
		var e *Emulator
		if e, err = start(rieBinary, bootstrap, env, logs); err == nil {
			return e, nil
		}
		if !errors.Is(err, child.ErrExited) {
			return nil, err
		}
	}
	return nil, err
}

func start(rieBinary, bootstrap string, env []string, logs io.Writer) (*Emulator, error) {
	invokePort, err := child.FreePort()
	if err != nil {
		return nil, err
	}
	apiPort, err := child.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(rieBinary,
		"--runtime-interface-emulator-address", "127.0.0.1:"+invokePort,
		"--runtime-api-address", "127.0.0.1:"+apiPort,
		bootstrap)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	proc, err := child.Start(cmd)
	if err != nil {
		return nil, err
	}
	e := &Emulator{URL: "http://127.0.0.1:" + invokePort + "/2015-03-31/functions/function/invocations", proc: proc}
	// Ready when the emulator itself listens on both ports. A dial alone
	// is not enough: the emulator binds the runtime API port in a
	// goroutine and exits when that fails, so a dial to its invoke port
	// can succeed just before it dies, and the first invoke is reset.
	err = proc.WaitReady(context.Background(), 10*time.Second, 20*time.Millisecond, func() error {
		for _, port := range []string{invokePort, apiPort} {
			held, err := child.Listening(proc.Pid(), port)
			if err != nil {
				return err
			}
			if !held {
				return fmt.Errorf("the emulator does not listen on port %s yet", port)
			}
		}
		return nil
	})
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("emulator on port %s: %w", invokePort, err)
	}
	return e, nil
}

// Invoke sends payload and returns the function's response body. A
// function error comes back as an error with the body.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errorType"`)) {
		return body, fmt.Errorf("function error (HTTP %d): %s", resp.StatusCode, body)
	}
	return body, nil
}

// Stop ends the emulator and the bootstrap it runs.
func (e *Emulator) Stop() {
	e.proc.Stop(3 * time.Second)
}

// Pid is the emulator's process id (and process group).
func (e *Emulator) Pid() int { return e.proc.Pid() }
