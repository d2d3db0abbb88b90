package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/console"
)

// chromiumNames are the names Debian's chromium package, and others,
// install the browser under.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromium is the path of the browser the tests drive. A machine without
// one fails these tests, never skips them: the console is proven in a
// real browser or not at all.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range chromiumNames {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatalf("no chromium on PATH (looked for %s): the console's browser tests drive a real headless Chromium. "+
		"Install Debian's package as root: apt-get update && apt-get install -y chromium (.ci/run does this)", strings.Join(chromiumNames, ", "))
	return ""
}

// browser starts a headless Chromium for the test, with a fresh profile,
// no background connections (this machine's network is closed), and
// evil.test and attacker.test resolving to 127.0.0.1, as a rebinding
// attacker's names would. It returns the tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 860),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1, MAP attacker.test 127.0.0.1"),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// A bound on a hung browser, not a timed assertion.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// text is the text of the first element sel finds, once it is visible.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))), sel)
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}

// count is how many elements sel finds now.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	require.NoError(t, err, sel)
	return n
}

// act runs steps in the tab.
func act(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// nav opens url and waits for sel on the page it loads.
func nav(t *testing.T, ctx context.Context, url, sel string) {
	t.Helper()
	act(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
}

func TestBrowser_AnOperatorFindsRedrivesAndPurgesDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, nil)
	ctx := browser(t)

	// The overview: the staged dead letters, the blocked group.
	nav(t, ctx, c.url+"/", "#dead-total")
	require.Equal(t, "6", text(t, ctx, "#dead-total"))
	require.Equal(t, "1", text(t, ctx, "#blocked-groups"))
	require.Contains(t, text(t, ctx, "#routes"), "ghost")
	require.Equal(t, 4, count(t, ctx, "#shards tbody tr"), "one line a shard")

	// Filter the dead letters by route.
	nav(t, ctx, c.url+"/dead", "#filters")
	require.Equal(t, 6, count(t, ctx, "#dead tbody tr"))
	act(t, ctx, chromedp.SetValue(chromedp.CSS(`#filters input[name=queue]`), "ghost"), chromedp.Click(chromedp.CSS("#filter")),
		chromedp.WaitVisible(chromedp.CSS(`#filters input[name=queue][value=ghost]`)))
	require.Equal(t, 4, count(t, ctx, "#dead tbody tr"), "the ghost dead letters only")
	list := text(t, ctx, "#dead tbody")
	require.Contains(t, list, "ghost-0")
	require.NotContains(t, list, "other-0")
	require.Contains(t, list, `no route for queue "ghost"`)
	// And by group: the blocked head alone, marked.
	nav(t, ctx, c.url+"/dead?group=g", "#dead")
	require.Equal(t, 1, count(t, ctx, "#dead tbody tr"))
	require.Contains(t, text(t, ctx, "#dead tbody"), "yes")

	// Open one, then its payload: escaped, inert.
	nav(t, ctx, c.url+"/dead?queue=ghost", "#dead")
	act(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/row?key=ghost-script"]`)), chromedp.WaitVisible(chromedp.CSS("#row")))
	require.Equal(t, "failed", text(t, ctx, "#status"))
	require.Contains(t, text(t, ctx, "#errors"), `no route for queue "ghost"`)
	require.Zero(t, count(t, ctx, "#payload"), "the payload only when asked for")
	act(t, ctx, chromedp.Click(chromedp.CSS("#show-payload")), chromedp.WaitVisible(chromedp.CSS("#payload")))
	require.Equal(t, scriptPayload, text(t, ctx, "#payload"), "the payload is shown as text")
	require.Zero(t, count(t, ctx, "script"), "and runs nothing")
	require.Zero(t, count(t, ctx, "main img, main b"))
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	require.NotContains(t, title, "pwned")

	// Redrive one and see it delivered once its route exists.
	nav(t, ctx, c.url+"/row?key=ghost-0", "#redrive")
	act(t, ctx, chromedp.Click(chromedp.CSS("#redrive")), chromedp.WaitVisible(chromedp.CSS("#result")))
	require.Equal(t, "Redriven 1, skipped 0 (not dead letters).", text(t, ctx, "#result"))
	e.vars["OUTFLOW_ROUTES"] += ",ghost=" + e.ghost
	require.Equal(t, 1, e.sweep(t).Delivered)
	require.Equal(t, []string{"ghost-0"}, receivedKeys(t, e.ghost, 1))
	// Delivered rows are kept as done (OUTFLOW_DONE_RETENTION).
	act(t, ctx, chromedp.Click(chromedp.CSS("#the-row")), chromedp.WaitVisible(chromedp.CSS("#status")))
	require.Equal(t, "done", text(t, ctx, "#status"))

	// Purge a selected one, after a confirmation that names it.
	nav(t, ctx, c.url+"/dead?queue=ghost", "#dead")
	act(t, ctx, chromedp.Click(chromedp.CSS(`input[name=key][value="ghost-1"]`)), chromedp.Click(chromedp.CSS("#purge-selected")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-what")))
	confirm := text(t, ctx, "#confirm")
	require.Contains(t, confirm, "these 1 dead letter(s)")
	require.Contains(t, confirm, "ghost-1")
	require.NotContains(t, confirm, "ghost-2")
	require.Equal(t, "failed", string(e.status(t, "ghost-1")), "the confirmation changes nothing")
	act(t, ctx, chromedp.Click(chromedp.CSS("#confirm-purge")), chromedp.WaitVisible(chromedp.CSS("#result")))
	require.Equal(t, "Purged 1, skipped 0 (not dead letters).", text(t, ctx, "#result"))
	require.Empty(t, e.status(t, "ghost-1"))
	require.Equal(t, "failed", string(e.status(t, "ghost-2")))

	// Purge a route's, after a confirmation that counts them.
	nav(t, ctx, c.url+"/dead?queue=other", "#purge-route")
	act(t, ctx, chromedp.Click(chromedp.CSS("#purge-route")), chromedp.WaitVisible(chromedp.CSS("#confirm-what")))
	require.Contains(t, text(t, ctx, "#confirm-what"), "every dead letter of route other")
	require.Contains(t, text(t, ctx, "#confirm-what"), ": 1 now")
	act(t, ctx, chromedp.Click(chromedp.CSS("#confirm-purge")), chromedp.WaitVisible(chromedp.CSS("#result")))
	require.Equal(t, "Purged 1, skipped 0 (not dead letters).", text(t, ctx, "#result"))
	require.Empty(t, e.status(t, "other-0"))

	// The blocked group: its head, the rows behind it; redriving the head
	// (the size limit lifted) lets the group go on in order.
	nav(t, ctx, c.url+"/groups", "#groups")
	groups := text(t, ctx, "#groups tbody")
	require.Contains(t, groups, "g-1")
	require.Regexp(t, `\b2\b`, groups, "two rows staged behind the head")
	act(t, ctx, chromedp.Click(chromedp.CSS(`#groups button[type=submit]:not([formaction])`)), chromedp.WaitVisible(chromedp.CSS("#result")))
	require.Equal(t, "Redriven 1, skipped 0 (not dead letters).", text(t, ctx, "#result"))
	require.Equal(t, 3, e.sweep(t).Delivered)
	require.Equal(t, e.group, receivedKeys(t, e.events, 3))
	nav(t, ctx, c.url+"/groups", "#groups")
	require.Contains(t, text(t, ctx, "#groups tbody"), "no blocked group")
	nav(t, ctx, c.url+"/", "#blocked-groups")
	require.Equal(t, "0", text(t, ctx, "#blocked-groups"))
	require.Equal(t, "2", text(t, ctx, "#dead-total"), "ghost-2 and the script row are left")
}

// A row redriven and dead again has two attempts numbered 1: its page
// says when it was redriven and where in the history the count restarts.
func TestBrowser_ARowsHistoryMarksWhereARedriveRestartedItsAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, nil)
	ctx := browser(t)

	nav(t, ctx, c.url+"/row?key=ghost-2", "#redrive")
	require.Zero(t, count(t, ctx, "#redriven"), "never redriven")
	act(t, ctx, chromedp.Click(chromedp.CSS("#redrive")), chromedp.WaitVisible(chromedp.CSS("#result")))
	e.vars["OUTFLOW_MAX_ATTEMPTS"] = "1"
	require.Equal(t, 1, e.sweep(t).DeadLettered, "still no route: dead again")

	nav(t, ctx, c.url+"/row?key=ghost-2", "#errors")
	require.Contains(t, text(t, ctx, "#redriven"), "attempts count from 1 again")
	require.Equal(t, 1, count(t, ctx, "#errors tr.redriven"))
	require.Equal(t, 3, count(t, ctx, "#errors tbody tr"), "#1, the redrive, #1")
}

func TestBrowser_ReadOnlyShowsNoAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, func(cfg *console.Config) { cfg.ReadOnly = true })
	ctx := browser(t)
	for _, path := range []string{"/", "/dead?queue=ghost", "/row?key=ghost-0", "/groups"} {
		nav(t, ctx, c.url+path, "#read-only")
		require.Zero(t, count(t, ctx, `form[method=post], button[formaction], input[type=checkbox]`), "%s shows no action", path)
	}
	// A POST the page could not make, made anyway, is refused.
	nav(t, ctx, attacker(t, c.url, c.CSRF()), "#go")
	act(t, ctx, chromedp.Click(chromedp.CSS("#go")), chromedp.WaitVisible(chromedp.CSS("#refused")))
	require.Equal(t, "failed", string(e.status(t, "ghost-0")))
}

func TestBrowser_RefusesAForeignHostAndACrossSitePost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, nil)
	ctx := browser(t)
	port := c.url[strings.LastIndex(c.url, ":"):]

	// DNS rebinding: evil.test resolves to 127.0.0.1, the console's port.
	nav(t, ctx, "http://evil.test"+port+"/dead", "#refused")
	require.Contains(t, text(t, ctx, "#refused"), "answers only to")
	require.Zero(t, count(t, ctx, "#dead"), "no dead letter shown")

	// A page elsewhere posts a redrive, without the CSRF token.
	nav(t, ctx, attacker(t, c.url, ""), "#go")
	act(t, ctx, chromedp.Click(chromedp.CSS("#go")), chromedp.WaitVisible(chromedp.CSS("#refused")))
	require.Contains(t, text(t, ctx, "#refused"), "another origin")
	require.Equal(t, "failed", string(e.status(t, "ghost-0")))
}

// attacker serves, at attacker.test, a page whose form posts a redrive of
// ghost-0 to the console, with csrf if given, and returns its URL.
func attacker(t *testing.T, console, csrf string) string {
	t.Helper()
	page := `<!doctype html><form method="post" action="` + console + `/redrive"><input name="key" value="ghost-0">` +
		`<input name="csrf" value="` + csrf + `"><button id="go" type="submit">win a prize</button></form>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	return "http://attacker.test" + srv.URL[strings.LastIndex(srv.URL, ":"):] + "/"
}

// receivedKeys receives n messages from url and returns their row keys.
func receivedKeys(t *testing.T, url string, n int) []string {
	t.Helper()
	return awstest.ReceiveKeys(t, url, n, 10*time.Second)
}
