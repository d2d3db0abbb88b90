package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/cli"
)

// lines passes each line written to it on a channel.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		select {
		case l.ch <- strings.TrimSuffix(line, "\n"):
		default: // nobody reads (request logs): dropped
		}
	}
}

// startUI runs outflow ui with args until the test ends, and returns
// the URL it printed.
func (e *env) startUI(t *testing.T, args ...string) (string, []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lines{ch: make(chan string, 16)}
	code := make(chan int, 1)
	go func() {
		code <- cli.Execute(ctx, append([]string{"ui", "--no-metrics"}, args...), io.Discard, out, func(k string) string { return e.vars[k] })
	}()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, cli.ExitOK, <-code, "outflow ui ends cleanly on Ctrl-C")
	})
	var printed []string
	for line := range out.ch {
		printed = append(printed, line)
		if m := regexp.MustCompile(`at (http://\S+)`).FindStringSubmatch(line); m != nil {
			return m[1], printed
		}
	}
	return "", printed
}

func TestUI_ServesTheTableOnLoopbackAndPrintsItsURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deadLetters(t, "ghost", 2)
	url, printed := e.startUI(t, "--addr", "127.0.0.1:0", "--read-only")
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/$`, url)
	require.Contains(t, printed[0], e.table)
	require.Contains(t, printed[0], "(read-only)")
	res, err := http.Get(url + "dead")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), "ghost-0001")
	require.Contains(t, string(body), `id="read-only"`)
}

func TestUI_BeyondLoopbackNeedsAFlagAndPrintsAToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{{"--addr", "192.0.2.1:8080"}, {"--addr", "example.com:8080"}} {
		r := e.run(t, append([]string{"ui"}, args...)...)
		require.Equal(t, cli.ExitUsage, r.code, args)
		require.Contains(t, r.stderr, "--allow-remote")
	}
	for _, args := range [][]string{{"--addr", "0.0.0.0:8080", "--allow-remote"}, {"--addr", "8080"}, {"--refresh", "5s"}, {"--cap", "-1"}} {
		r := e.run(t, append([]string{"ui"}, args...)...)
		require.Equal(t, cli.ExitUsage, r.code, args)
	}

	// localhost is a name, not a loopback address: it takes the flag, and
	// the console then asks for the token it printed.
	url, printed := e.startUI(t, "--addr", "localhost:0", "--allow-remote")
	require.Regexp(t, `^http://localhost:\d+/\?token=\S+$`, url)
	require.Contains(t, strings.Join(printed, "\n"), "access token")
	base, _, _ := strings.Cut(url, "?")
	res, err := http.Get(base)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "no token, no console")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	res, err = (&http.Client{Jar: jar}).Get(url)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode, "the printed URL opens it")
}
