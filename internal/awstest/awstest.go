// Package awstest gives tests a real AWS API endpoint: the moto server,
// started once per test binary on a free loopback port and stopped when the
// tests end, or whatever endpoint OUTFLOW_TEST_ENDPOINT names (LocalStack,
// or real AWS), in which case nothing is started. Every table and queue a
// test makes has a unique name and is deleted after it, so tests run in
// parallel and against a shared endpoint.
package awstest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// EndpointEnv names the variable that points tests at an existing endpoint.
const EndpointEnv = "OUTFLOW_TEST_ENDPOINT"

// endpoint is the URL every client of this test binary uses.
var endpoint string

// Main runs the tests of a package against the endpoint, starting the moto
// server first if none is given. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }
func Main(m *testing.M) int {
	if ep := os.Getenv(EndpointEnv); ep != "" {
		endpoint = ep
		return m.Run()
	}
	srv, err := StartMoto(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "awstest:", err)
		return 1
	}
	defer srv.Stop()
	endpoint = srv.URL
	return m.Run()
}

// Endpoint is the URL tests talk to.
func Endpoint() string { return endpoint }

// Moto is a running moto server.
type Moto struct {
	// URL is its endpoint, http://127.0.0.1:PORT.
	URL string
	cmd *exec.Cmd
}

// MotoPath finds the moto_server executable: $OUTFLOW_MOTO_SERVER, else the
// project virtualenv (.venv/bin/moto_server above the working directory),
// else $PATH.
func MotoPath() (string, error) {
	if p := os.Getenv("OUTFLOW_MOTO_SERVER"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ".venv", "bin", "moto_server")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if p, err := exec.LookPath("moto_server"); err == nil {
		return p, nil
	}
	return "", errors.New("moto_server not found: run `make venv` (or `make test`, which depends on it) to install it into .venv")
}

// StartMoto starts a moto server on a free loopback port and waits until it
// answers. It runs in its own process group and dies with its parent.
func StartMoto(ctx context.Context) (*Moto, error) {
	path, err := MotoPath()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Getenv("OUTFLOW_MOTO_LOG") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	m := &Moto{URL: "http://127.0.0.1:" + port, cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(m.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return m, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			m.Stop()
			return nil, fmt.Errorf("moto server on port %s did not answer: %w", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the server and every process it started.
func (m *Moto) Stop() {
	if m.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}

// Config is an AWS config for the endpoint. Without credentials in the
// environment it uses static test ones, which moto and LocalStack accept.
func Config(ctx context.Context, ep string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithRegion(region())}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	cfg.BaseEndpoint = aws.String(ep)
	return cfg, nil
}

func region() string {
	if r := os.Getenv("AWS_REGION"); r != "" {
		return r
	}
	return "us-east-1"
}

// TestConfig is Config for the test endpoint, failing t on error.
func TestConfig(t testing.TB) aws.Config {
	t.Helper()
	cfg, err := Config(context.Background(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// UniqueName is prefix plus a random suffix, valid as a table or queue name.
func UniqueName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:12])
}
