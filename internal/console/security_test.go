package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/console"
	"github.com/outflowhq/outflow/internal/outbox"
)

// do sends a request to the console, with host as its Host header when
// given, and returns the status and body.
func do(t *testing.T, method, u, host string, form url.Values, header map[string]string) (int, string, http.Header) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b), res.Header
}

func TestConsole_RefusesWhatItsSecurityRulesForbid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, nil)
	key := e.ghostKeys[0]
	redrive := func(csrf string) url.Values { return url.Values{"key": {key}, "csrf": {csrf}} }
	for _, tt := range []struct {
		name, method, path, host string
		form                     url.Values
		header                   map[string]string
		status                   int
		says                     string
	}{
		{"a foreign Host (DNS rebinding)", "GET", "/", "evil.example:80", nil, nil, http.StatusMisdirectedRequest, "answers only to"},
		{"a foreign Host on the right port", "GET", "/dead", "rebind.example" + c.url[strings.LastIndex(c.url, ":"):], nil, nil, http.StatusMisdirectedRequest, "answers only to"},
		{"a POST with a foreign Host", "POST", "/redrive", "evil.example", redrive(c.CSRF()), nil, http.StatusMisdirectedRequest, "answers only to"},
		{"a POST without a CSRF token", "POST", "/redrive", "", url.Values{"key": {key}}, nil, http.StatusForbidden, "no valid CSRF token"},
		{"a POST with a wrong CSRF token", "POST", "/redrive", "", redrive("not-" + c.CSRF()), nil, http.StatusForbidden, "no valid CSRF token"},
		{"a POST from another origin", "POST", "/purge", "", url.Values{"key": {key}, "csrf": {c.CSRF()}, "confirm": {"yes"}},
			map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "another origin"},
		{"an action by GET", "GET", "/redrive?key=" + key, "", nil, nil, http.StatusMethodNotAllowed, "Method Not Allowed"},
		{"a purge by GET", "GET", "/purge?key=" + key + "&confirm=yes", "", nil, nil, http.StatusMethodNotAllowed, "Method Not Allowed"},
		{"a method other than GET and POST", "DELETE", "/row?key=" + key, "", nil, nil, http.StatusMethodNotAllowed, "Method Not Allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := do(t, tt.method, c.url+tt.path, tt.host, tt.form, tt.header)
			require.Equal(t, tt.status, status, body)
			require.Contains(t, body, tt.says)
		})
	}
	require.Equal(t, outbox.StatusFailed, e.status(t, key), "nothing refused changed the row")

	status, body, _ := do(t, "POST", c.url+"/redrive", "", redrive(c.CSRF()), map[string]string{"Origin": c.url})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Redriven 1, skipped 0")
	require.Equal(t, outbox.StatusPending, e.status(t, key), "the same POST with the token and the bound Host acts")
	status, body, _ = do(t, "GET", c.url+"/", "localhost"+c.url[strings.LastIndex(c.url, ":"):], nil, nil)
	require.Equal(t, http.StatusOK, status, "localhost names the loopback console too")
	require.Contains(t, body, `<meta http-equiv="refresh" content="60">`, "the overview reloads itself at the default rate")
	require.NotContains(t, body, "unrouted-note", "dead letters tallied from a scan: every queue counted")
	c = e.serve(t, func(cfg *console.Config) { cfg.DeadQueues = []string{"events.fifo", "(none)"} })
	_, body, _ = do(t, "GET", c.url+"/", "", nil, nil)
	require.Contains(t, body, "unrouted-note", "counted by route: the others are said to be left out")

	for name, form := range map[string]url.Values{
		"nothing selected":           {"csrf": {c.CSRF()}},
		"keys and a route both":      {"csrf": {c.CSRF()}, "key": {key}, "queue": {"ghost"}},
		"a body over the form limit": {"csrf": {c.CSRF()}, "key": {strings.Repeat("k", 1<<20)}},
	} {
		status, _, _ := do(t, "POST", c.url+"/purge", "", form, nil)
		require.GreaterOrEqual(t, status, 400, name)
		require.Less(t, status, 500, name)
	}
	require.Equal(t, outbox.StatusFailed, e.status(t, e.ghostKeys[1]))
}

func TestConsole_SetsAStrictContentSecurityPolicyOnEveryResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, nil)
	for _, path := range []string{"/", "/dead", "/row?key=" + e.scriptKey + "&payload=1", "/groups", "/assets/style.css", "/nope"} {
		_, _, h := do(t, "GET", c.url+path, "", nil, nil)
		csp := h.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'none'", path)
		require.NotContains(t, csp, "script-src", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), path)
	}
	_, _, h := do(t, "GET", c.url+"/evil", "evil.example", nil, nil)
	require.NotEmpty(t, h.Get("Content-Security-Policy"), "a refused request too")
}

func TestConsole_EscapesPayloadsAndLogsNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, nil)
	status, body, _ := do(t, "GET", c.url+"/row?key="+e.scriptKey+"&payload=1", "", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, "<script>document")
	require.NotContains(t, body, "<img src=x")
	require.NotContains(t, body, "<b>bold")
	require.Contains(t, body, "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;")
	require.Contains(t, body, "&lt;b&gt;bold&lt;/b&gt;")
	require.NotContains(t, body, "<script", "the console itself runs no script")

	// A payload that is not text is shown as base64, and only on request.
	require.NoError(t, e.op.Stage(context.Background(), outbox.Row{Key: "binary", Queue: "ghost", Payload: []byte{0xff, 0x00, '<', 0xfe}}, time.Now()))
	_, body, _ = do(t, "GET", c.url+"/row?key=binary", "", nil, nil)
	require.Contains(t, body, "4 bytes")
	require.NotContains(t, body, `id="payload"`)
	_, body, _ = do(t, "GET", c.url+"/row?key=binary&payload=1", "", nil, nil)
	require.Contains(t, body, "not UTF-8 text: base64")
	require.Contains(t, body, `<pre id="payload">/wA8/g==</pre>`)

	require.Contains(t, c.log.String(), `"path":"/row"`, "requests are logged")
	require.NotContains(t, c.log.String(), "pwned", "no payload is logged")
	require.NotContains(t, c.log.String(), e.scriptKey, "no query is logged")
}

func TestConsole_ReadOnlyShowsNoActionAndRefusesEveryPost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, func(cfg *console.Config) { cfg.ReadOnly = true })
	for _, path := range []string{"/", "/dead", "/dead?queue=ghost", "/row?key=" + e.ghostKeys[0], "/groups"} {
		status, body, _ := do(t, "GET", c.url+path, "", nil, nil)
		require.Equal(t, http.StatusOK, status, path)
		require.Contains(t, body, "read-only", path)
		require.NotContains(t, body, `method="post"`, "%s shows no action", path)
	}
	for _, path := range []string{"/redrive", "/purge"} {
		status, body, _ := do(t, "POST", c.url+path, "", url.Values{"key": {e.ghostKeys[0]}, "csrf": {c.CSRF()}, "confirm": {"yes"}}, nil)
		require.Equal(t, http.StatusForbidden, status, path)
		require.Contains(t, body, "read-only")
	}
	require.Equal(t, outbox.StatusFailed, e.status(t, e.ghostKeys[0]))
}

func TestConsole_BeyondLoopbackAsksForItsAccessToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := console.NewToken()
	c := e.serve(t, func(cfg *console.Config) { cfg.Token = token })
	status, body, _ := do(t, "GET", c.url+"/", "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, "access token")
	status, _, _ = do(t, "GET", c.url+"/dead?token=wrong", "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, status)
	status, _, _ = do(t, "GET", c.url+"/dead", "", nil, map[string]string{"Cookie": "outflow_console_token=wrong"})
	require.Equal(t, http.StatusUnauthorized, status)

	status, _, h := do(t, "GET", c.url+"/dead?queue=ghost&token="+token, "", nil, nil)
	require.Equal(t, http.StatusSeeOther, status, "the token moves to a cookie")
	require.Equal(t, "/dead?queue=ghost", h.Get("Location"), "and leaves the address")
	cookie := h.Get("Set-Cookie")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	status, body, _ = do(t, "GET", c.url+"/dead?queue=ghost", "", nil, map[string]string{"Cookie": "outflow_console_token=" + token})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, e.ghostKeys[0])
	status, _, _ = do(t, "POST", c.url+"/redrive", "", url.Values{"key": {e.ghostKeys[0]}, "csrf": {c.CSRF()}}, nil)
	require.Equal(t, http.StatusUnauthorized, status, "a POST needs the token too")
	require.NotContains(t, c.log.String(), token, "the token is never logged")
}

func TestAllowedHosts_AreTheBoundOneAndLoopbackNamesOfItsPort(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}, console.AllowedHosts("127.0.0.1:8080"))
	require.Equal(t, []string{"10.0.0.5:80"}, console.AllowedHosts("10.0.0.5:80"))
}
