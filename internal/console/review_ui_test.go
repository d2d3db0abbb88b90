package console_test

// Adversarial review of the console (review-ui): each test names the
// behaviour it expects; a failing one is a defect for the lead to fix.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/console"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// counting is the DynamoDB client with a count of the index reads and the
// items they returned.
type counting struct {
	*dynamodb.Client
	mu                   sync.Mutex
	queries, scans, read int
	tableScans           int
}

func (c *counting) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, o...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries++
	if out != nil {
		c.read += len(out.Items)
	}
	return out, err
}

func (c *counting) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := c.Client.Scan(ctx, in, o...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scans++
	if in.IndexName == nil {
		c.tableScans++
	}
	if out != nil {
		c.read += len(out.Items)
	}
	return out, err
}

func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries, c.scans, c.read, c.tableScans = 0, 0, 0, 0
}

// rig is a bare table with rows written as items, and a console on it.
type rig struct {
	table string
	api   *counting
	op    *dynamo.Operator
	url   string
	c     *console.Server
	log   *syncBuffer
	port  string
}

func newRig(t *testing.T, ordered string, adjust func(*console.Config)) *rig {
	t.Helper()
	r := &rig{table: awstest.NewTable(t), api: &counting{Client: awstest.DynamoDB(t)}}
	var err error
	r.op, err = dynamo.NewOperator(r.api, dynamo.Config{Table: r.table, Shards: 4})
	require.NoError(t, err)
	ord, err := config.ParseOrdered(ordered)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r.log = &syncBuffer{}
	cfg := console.Config{
		Operator: r.op, Ordered: func(context.Context) (map[string]outbox.DeadHead, error) { return ord, nil },
		Addr: ln.Addr().String(), Log: slog.New(slog.NewJSONHandler(r.log, nil)),
	}
	if adjust != nil {
		adjust(&cfg)
	}
	r.c, err = console.New(cfg)
	require.NoError(t, err)
	srv := &http.Server{Handler: r.c}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = "http://" + ln.Addr().String()
	_, r.port, _ = net.SplitHostPort(ln.Addr().String())
	return r
}

// put writes row as it is stored, then applies the overrides (nil: remove).
func (r *rig) put(t *testing.T, row outbox.Row, over map[string]types.AttributeValue) {
	t.Helper()
	av, err := dynamo.Encode(row, 4)
	require.NoError(t, err)
	for k, v := range over {
		if v == nil {
			delete(av, k)
		} else {
			av[k] = v
		}
	}
	_, err = r.api.Client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(r.table), Item: av})
	require.NoError(t, err)
}

func deadRow(key, queue string, failed time.Time, payload []byte) outbox.Row {
	return outbox.Row{
		Key: key, Queue: queue, Payload: payload, Status: outbox.StatusFailed, Attempt: 3,
		CreatedAt: failed.Add(-time.Minute), FailedAt: failed, LastError: "boom " + key,
		Errors: []outbox.AttemptError{{At: failed, Attempt: 3, Message: "boom " + key}},
	}
}

func (r *rig) status(t *testing.T, key string) outbox.Status {
	t.Helper()
	row, err := r.op.Get(context.Background(), key)
	require.NoError(t, err)
	if row == nil {
		return ""
	}
	return row.Status
}

func TestReview_HostVariants_OnlyTheBoundNamesAreServed(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + r.port, true},
		{"LOCALHOST:" + r.port, true},
		{"[::1]:" + r.port, true},
		{"127.0.0.1", false},
		{"localhost", false},
		{"127.0.0.1.:" + r.port, false},
		{"localhost.:" + r.port, false},
		{"127.0.0.1:" + r.port + ".", false},
		{"evil.example:" + r.port, false},
		{"127.1:" + r.port, false},
		{"[::ffff:127.0.0.1]:" + r.port, false},
		{"127.0.0.1:0" + r.port, false},
	} {
		status, body, h := do(t, "GET", r.url+"/row", tt.host, nil, nil)
		if tt.ok {
			require.Equal(t, http.StatusOK, status, "%s: %s", tt.host, body)
		} else {
			require.Equal(t, http.StatusMisdirectedRequest, status, "%s: %s", tt.host, body)
		}
		require.NotEmpty(t, h.Get("Content-Security-Policy"), tt.host)
	}
	// No Host at all (HTTP/1.0).
	conn, err := net.Dial("tcp", "127.0.0.1:"+r.port)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /row HTTP/1.0\r\n\r\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "421", "a request without Host is refused")
}

func TestReview_CSRF_RefusesEveryForgery(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	now := time.Now()
	r.put(t, deadRow("k1", "q", now, []byte("x")), nil)
	csrf := r.c.CSRF()
	for _, tt := range []struct {
		name, method, path string
		form               url.Values
		header             map[string]string
		want               int
	}{
		{"Origin null", "POST", "/redrive", url.Values{"key": {"k1"}, "csrf": {csrf}}, map[string]string{"Origin": "null"}, 403},
		{"foreign Origin, right port", "POST", "/redrive", url.Values{"key": {"k1"}, "csrf": {csrf}}, map[string]string{"Origin": "http://evil.example:" + r.port}, 403},
		{"https Origin of the same host", "POST", "/redrive", url.Values{"key": {"k1"}, "csrf": {csrf}}, map[string]string{"Origin": "https://127.0.0.1:" + r.port}, 403},
		{"no Origin, foreign Referer, no token", "POST", "/redrive", url.Values{"key": {"k1"}}, map[string]string{"Referer": "http://evil.example/"}, 403},
		{"token in the query string only", "POST", "/redrive?csrf=" + url.QueryEscape(csrf) + "&key=k1", url.Values{}, nil, 403},
		{"empty token", "POST", "/redrive", url.Values{"key": {"k1"}, "csrf": {""}}, nil, 403},
		{"token twice, wrong first", "POST", "/redrive", url.Values{"key": {"k1"}, "csrf": {"x", csrf}}, nil, 403},
		{"method override header on GET", "GET", "/redrive?key=k1&csrf=" + url.QueryEscape(csrf), nil, map[string]string{"X-HTTP-Method-Override": "POST"}, 405},
		{"_method on GET", "GET", "/purge?key=k1&confirm=yes&_method=POST&csrf=" + url.QueryEscape(csrf), nil, nil, 405},
		{"PUT", "PUT", "/redrive", url.Values{"key": {"k1"}, "csrf": {csrf}}, nil, 405},
		{"token of another console", "POST", "/redrive", url.Values{"key": {"k1"}, "csrf": {console.NewToken()}}, nil, 403},
	} {
		status, body, _ := do(t, tt.method, r.url+tt.path, "", tt.form, tt.header)
		require.Equal(t, tt.want, status, "%s: %s", tt.name, body)
	}
	require.Equal(t, outbox.StatusFailed, r.status(t, "k1"))
	// A body over the cap is refused and changes nothing.
	big := url.Values{"key": {"k1"}, "pad": {strings.Repeat("a", 2<<20)}, "csrf": {csrf}}
	status, _, _ := do(t, "POST", r.url+"/redrive", "", big, nil)
	require.GreaterOrEqual(t, status, 400)
	require.Equal(t, outbox.StatusFailed, r.status(t, "k1"))
}

func TestReview_ReadOnly_RefusesEveryPOSTAndShowsNoAction(t *testing.T) {
	t.Parallel()
	r := newRig(t, "q.fifo", func(c *console.Config) { c.ReadOnly = true; c.DeadQueues = []string{"q"} })
	now := time.Now()
	r.put(t, deadRow("k1", "q", now, []byte("x")), nil)
	for _, p := range []string{"/redrive", "/purge", "/", "/row", "/nope", "/dead"} {
		status, body, _ := do(t, "POST", r.url+p, "", url.Values{"key": {"k1"}, "csrf": {r.c.CSRF()}, "confirm": {"yes"}}, nil)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", p, body)
	}
	for _, p := range []string{"/", "/dead", "/dead?queue=q", "/row?key=k1", "/row?key=k1&payload=1", "/groups"} {
		status, body, _ := do(t, "GET", r.url+p, "", nil, nil)
		require.Equal(t, http.StatusOK, status, p)
		require.NotContains(t, strings.ToLower(body), `method="post"`, p)
		require.NotContains(t, body, r.c.CSRF(), "a read-only page carries no CSRF token: %s", p)
	}
	require.Equal(t, outbox.StatusFailed, r.status(t, "k1"))
}

func TestReview_CSP_IsOnEveryResponse(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", func(c *console.Config) { c.Token = "tok" })
	get := func(path, host string, cookie bool) (int, http.Header) {
		h := map[string]string{}
		if cookie {
			h["Cookie"] = "outflow_console_token=tok"
		}
		status, _, hdr := do(t, "GET", r.url+path, host, nil, h)
		return status, hdr
	}
	for _, tt := range []struct {
		path, host string
		cookie     bool
		want       int
	}{
		{"/", "", false, 401},
		{"/?token=tok", "", false, 303},
		{"/", "evil.example", false, 421},
		{"/nope", "", true, 404},
		{"/assets/", "", true, 200},
		{"/assets/nope.css", "", true, 404},
		{"/dead?within=xx", "", true, 400},
		{"/row?key=missing", "", true, 404},
		{"/assets/../templates/layout.html", "", true, 0},
		{"/assets/%2e%2e/templates/layout.html", "", true, 0},
	} {
		status, h := get(tt.path, tt.host, tt.cookie)
		if tt.want != 0 {
			require.Equal(t, tt.want, status, tt.path)
		} else {
			require.NotEqual(t, http.StatusOK, status, "no traversal out of assets: %s", tt.path)
		}
		require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'none'", tt.path)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), tt.path)
	}
	status, _, h := do(t, "POST", r.url+"/row", "", url.Values{}, map[string]string{"Cookie": "outflow_console_token=tok"})
	require.Equal(t, 403, status)
	require.NotEmpty(t, h.Get("Content-Security-Policy"))
}

func TestReview_AccessToken_NeverLeaksAndIsRequired(t *testing.T) {
	t.Parallel()
	tok := console.NewToken()
	r := newRig(t, "none", func(c *console.Config) { c.Token = tok })
	status, _, h := do(t, "GET", r.url+"/dead?queue=q&token="+tok, "", nil, nil)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/dead?queue=q", h.Get("Location"), "the redirect drops the token and keeps the rest")
	c := h.Get("Set-Cookie")
	require.Contains(t, c, "HttpOnly")
	require.Contains(t, c, "SameSite=Strict")
	for _, bad := range []string{"", tok[:len(tok)-1], tok + "x", strings.ToLower(tok)} {
		status, _, _ = do(t, "GET", r.url+"/?token="+url.QueryEscape(bad), "", nil, nil)
		require.Equal(t, http.StatusUnauthorized, status, bad)
	}
	// A POST carrying the token in its URL is not let in by it.
	status, _, _ = do(t, "POST", r.url+"/redrive?token="+tok, "", url.Values{"key": {"k"}, "csrf": {r.c.CSRF()}}, nil)
	require.Equal(t, http.StatusUnauthorized, status)
	require.NotContains(t, r.log.String(), tok, "the log never holds the token")
}

// evil is what a route, key, group or error could hold.
const evil = `"'><script>alert(1)</script><img src=x onerror=alert(2)>`

func TestReview_XSS_EveryFieldIsEscaped(t *testing.T) {
	t.Parallel()
	r := newRig(t, "x.fifo", func(c *console.Config) { c.DeadQueues = []string{evil} })
	now := time.Now()
	row := deadRow(evil, evil, now, []byte(evil+"PAYLOADMARK"))
	row.LastError = evil
	row.Attributes = map[string]string{evil: evil}
	row.Errors = []outbox.AttemptError{{At: now, Attempt: 1, Message: evil}}
	r.put(t, row, nil)
	jsKey := "javascript:alert(3)"
	r.put(t, deadRow(jsKey, "q", now, []byte("x")), nil)
	fifo := deadRow("f1", "x.fifo", now, []byte("y"))
	fifo.Group, fifo.Seq = evil, 1
	r.put(t, fifo, nil)
	r.put(t, outbox.Row{Key: "t", Queue: "x.fifo", Group: evil, Status: outbox.StatusPending, Seq: 2, Prev: "f1", CreatedAt: now, DueAt: now}, nil)
	pages := []string{"/", "/dead", "/dead?queue=" + url.QueryEscape(evil), "/dead?group=" + url.QueryEscape(evil),
		"/dead?within=" + url.QueryEscape(evil), "/row?key=" + url.QueryEscape(evil), "/row?key=" + url.QueryEscape(evil) + "&payload=1",
		"/row?key=" + url.QueryEscape(jsKey), "/row?key=nothing" + url.QueryEscape(evil), "/groups"}
	for _, p := range pages {
		_, body, _ := do(t, "GET", r.url+p, "", nil, nil)
		require.NotContains(t, body, "<script>alert", p)
		require.NotContains(t, body, "<img src=x", p)
		require.NotContains(t, body, `href="javascript:`, p)
	}
	_, body, _ := do(t, "POST", r.url+"/purge", "", url.Values{"key": {evil}, "csrf": {r.c.CSRF()}}, nil)
	require.NotContains(t, body, "<script>alert")
	_, body, _ = do(t, "POST", r.url+"/purge", "", url.Values{"queue": {evil}, "csrf": {r.c.CSRF()}}, nil)
	require.NotContains(t, body, "<script>alert")
	require.Contains(t, body, ": 1 now", "the confirmation counts the route's one dead letter")
	require.NotContains(t, r.log.String(), "PAYLOADMARK", "no payload in the log")
}

func TestReview_BinaryAndHugePayloads_AreShownEscaped(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	now := time.Now()
	r.put(t, deadRow("bin", "q", now, []byte{0xff, 0x00, '<', 's', 0xfe}), nil)
	r.put(t, deadRow("huge", "q", now, []byte(strings.Repeat("é<", 100_000))), nil)
	r.put(t, deadRow("ключ-🔑", "очередь", now, []byte("ünïcødé")), nil)
	status, body, _ := do(t, "GET", r.url+"/row?key=bin&payload=1", "", nil, nil)
	require.Equal(t, 200, status)
	require.Contains(t, body, "/wA8c/4=", "binary shown as base64")
	status, body, _ = do(t, "GET", r.url+"/row?key=huge&payload=1", "", nil, nil)
	require.Equal(t, 200, status)
	require.NotContains(t, body, "é<é")
	status, body, _ = do(t, "GET", r.url+"/row?key="+url.QueryEscape("ключ-🔑")+"&payload=1", "", nil, nil)
	require.Equal(t, 200, status)
	require.Contains(t, body, "ünïcødé")
	status, body, _ = do(t, "GET", r.url+"/dead?queue="+url.QueryEscape("очередь"), "", nil, nil)
	require.Equal(t, 200, status)
	require.Contains(t, body, "ключ-🔑")
}

func TestReview_MalformedItems_DoNotBreakAnyPage(t *testing.T) {
	t.Parallel()
	r := newRig(t, "m.fifo", func(c *console.Config) { c.DeadQueues = []string{"m", "m.fifo"} })
	now := time.Now()
	bad := map[string]map[string]types.AttributeValue{
		"attempt-S":    {"attempt": &types.AttributeValueMemberS{Value: "three"}},
		"errors-N":     {"errors": &types.AttributeValueMemberN{Value: "1"}},
		"attrs-S":      {"attributes": &types.AttributeValueMemberS{Value: "x"}},
		"payload-N":    {"payload": &types.AttributeValueMemberN{Value: "1"}},
		"payload-none": {"payload": nil},
		"status-N":     {"status": &types.AttributeValueMemberN{Value: "1"}},
		"created-S":    {"created_at": &types.AttributeValueMemberS{Value: "yesterday"}},
		"lasterr-L":    {"last_error": &types.AttributeValueMemberL{}},
		"queue-none":   {"queue": nil},
		"errors-bad":   {"errors": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}}},
	}
	for k, over := range bad {
		r.put(t, deadRow(k, "m", now, []byte("p")), over)
	}
	for k, over := range map[string]map[string]types.AttributeValue{
		"fifo-group-N": {"group": &types.AttributeValueMemberN{Value: "7"}},
		"fifo-seq-S":   {"seq": &types.AttributeValueMemberS{Value: "one"}},
		"fifo-prev-N":  {"prev": &types.AttributeValueMemberN{Value: "1"}, "seq": &types.AttributeValueMemberN{Value: "2"}},
	} {
		row := deadRow(k, "m.fifo", now, []byte("p"))
		row.Group, row.Seq = "g-"+k, 1
		r.put(t, row, over)
	}
	for _, p := range []string{"/", "/dead", "/dead?queue=m", "/dead?queue=m.fifo", "/dead?group=g", "/groups"} {
		status, body, _ := do(t, "GET", r.url+p, "", nil, nil)
		require.Equal(t, http.StatusOK, status, "%s: %s", p, body)
	}
	for k := range bad {
		status, body, _ := do(t, "GET", r.url+"/row?key="+k+"&payload=1", "", nil, nil)
		require.Equal(t, http.StatusOK, status, "%s: %s", k, body)
	}
	status, body, _ := do(t, "POST", r.url+"/purge", "", url.Values{"queue": {"m"}, "csrf": {r.c.CSRF()}}, nil)
	require.Equal(t, http.StatusOK, status, body)
}

func TestReview_Actions_AreConditionalAndCountSkips(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	now := time.Now()
	r.put(t, deadRow("d1", "q", now, []byte("x")), nil)
	live := deadRow("live", "q", now, []byte("x"))
	live.Status, live.DueAt, live.FailedAt = outbox.StatusPending, now, time.Time{}
	r.put(t, live, nil)
	csrf := r.c.CSRF()
	// Redriven by someone else meanwhile: skipped, not redriven twice.
	_, body, _ := do(t, "POST", r.url+"/redrive", "", url.Values{"key": {"live"}, "csrf": {csrf}}, nil)
	require.Contains(t, body, "Redriven 0, skipped 1")
	// Purge of a live row deletes nothing.
	_, body, _ = do(t, "POST", r.url+"/purge", "", url.Values{"key": {"live"}, "csrf": {csrf}, "confirm": {"yes"}}, nil)
	require.Contains(t, body, "skipped 1")
	require.Equal(t, outbox.StatusPending, r.status(t, "live"))
	// A key no row has: skipped, and no item made.
	_, body, _ = do(t, "POST", r.url+"/redrive", "", url.Values{"key": {"ghost"}, "csrf": {csrf}}, nil)
	require.Contains(t, body, "Redriven 0, skipped 1")
	require.Equal(t, outbox.Status(""), r.status(t, "ghost"))
	// The same key twice: once done, once skipped.
	_, body, _ = do(t, "POST", r.url+"/redrive", "", url.Values{"key": {"d1", "d1"}, "csrf": {csrf}}, nil)
	require.Contains(t, body, "Redriven 1, skipped 1")
	// A route purge confirmed at one moment takes nothing that died after it.
	r.put(t, deadRow("old", "r", now.Add(-time.Hour), []byte("x")), nil)
	at := now.Add(-time.Minute).UnixMilli()
	r.put(t, deadRow("new", "r", now, []byte("x")), nil)
	_, body, _ = do(t, "POST", r.url+"/purge", "", url.Values{"queue": {"r"}, "csrf": {csrf}, "confirm": {"yes"}, "at": {fmt.Sprint(at)}}, nil)
	require.Contains(t, body, "1")
	require.Equal(t, outbox.Status(""), r.status(t, "old"))
	require.Equal(t, outbox.StatusFailed, r.status(t, "new"), "a dead letter newer than the confirmation stays")
}

func TestReview_KeysWithSurroundingSpaces_CanBeLookedUpAndRedriven(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	r.put(t, deadRow(" spaced ", "q", time.Now(), []byte("x")), nil)
	r.put(t, deadRow("spaced", "q", time.Now(), []byte("x")), nil)
	status, body, _ := do(t, "GET", r.url+"/row?key="+url.QueryEscape(" spaced "), "", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "<td> spaced </td>", "the row shown is the one whose key was asked for")
	_, body, _ = do(t, "POST", r.url+"/redrive", "", url.Values{"key": {" spaced "}, "csrf": {r.c.CSRF()}}, nil)
	require.Contains(t, body, "Redriven 1")
	require.Equal(t, outbox.StatusPending, r.status(t, " spaced "), "the key named is the key redriven")
	require.Equal(t, outbox.StatusFailed, r.status(t, "spaced"), "not a different row whose key is the trimmed one")
}

func TestReview_RowLookup_MalformedKeysGetAClearAnswerNotA502(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	for _, k := range []string{strings.Repeat("k", 3000), "\xff\xfe"} {
		status, body, _ := do(t, "GET", r.url+"/row?key="+url.QueryEscape(k), "", nil, nil)
		require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, status, body)
	}
}

func TestReview_RouteActions_TakeEveryPageOfTheIndex(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	now := time.Now().Add(-time.Minute)
	const n = 120
	for i := range n {
		row := deadRow(fmt.Sprintf("b-%03d", i), "big", now.Add(-time.Duration(i)*time.Second), []byte("x"))
		row.LastError = strings.Repeat("e", 10_000) // > 1 MB of index: two pages
		r.put(t, row, nil)
	}
	_, body, _ := do(t, "POST", r.url+"/purge", "", url.Values{"queue": {"big"}, "csrf": {r.c.CSRF()}}, nil)
	require.Contains(t, body, fmt.Sprintf(": %d now", n))
	_, body, _ = do(t, "POST", r.url+"/redrive", "", url.Values{"queue": {"big"}, "csrf": {r.c.CSRF()}}, nil)
	require.Contains(t, body, fmt.Sprintf("Redriven %d, skipped 0", n))
}

// A route's page queries its partition of the dead index, about a page of
// it. (Without a route, the page scans the dead index, which holds only
// dead letters: its reads grow with them; docs/cli.md#console says so.)
func TestReview_DeadPage_OfARouteReadsAboutAPageOfTheIndexNotAllOfIt(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	now := time.Now().Add(-time.Minute)
	const n = 400
	for i := range n {
		r.put(t, deadRow(fmt.Sprintf("p-%03d", i), "q", now.Add(-time.Duration(i)*time.Second), []byte("x")), nil)
	}
	reads := map[string][2]int{}
	for _, p := range []string{"/dead?queue=q"} {
		r.api.reset()
		status, body, _ := do(t, "GET", r.url+p, "", nil, nil)
		require.Equal(t, 200, status)
		require.Contains(t, body, "p-000", "newest first")
		require.NotContains(t, body, "p-050<", "a page of 50")
		r.api.mu.Lock()
		reads[p] = [2]int{r.api.read, r.api.tableScans}
		r.api.mu.Unlock()
	}
	for p, n := range reads {
		require.Zero(t, n[1], p)
		require.LessOrEqual(t, n[0], 2*51+2, "%s read %d index items for a page of 50 (all reads: %v)", p, n[0], reads)
	}
}

// blockingMetrics is CloudWatch that never answers.
type blockingMetrics struct{ deadline chan bool }

func (b *blockingMetrics) GetMetricData(ctx context.Context, _ *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	_, ok := ctx.Deadline()
	b.deadline <- ok
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestReview_Overview_BoundsItsWaitForCloudWatch(t *testing.T) {
	t.Parallel()
	m := &blockingMetrics{deadline: make(chan bool, 1)}
	r := newRig(t, "none", func(c *console.Config) { c.Metrics = &console.Metrics{API: m, Namespace: "Outflow"} })
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", r.url+"/", nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	hasDeadline := <-m.deadline
	cancel()
	<-done
	require.True(t, hasDeadline, "the CloudWatch read has its own deadline: a CloudWatch that hangs must not hang the overview (and every other overview, behind the chart cache's lock)")
}

// failingMetrics counts its calls and always fails.
type failingMetrics struct {
	mu    sync.Mutex
	calls int
}

func (f *failingMetrics) GetMetricData(context.Context, *cloudwatch.GetMetricDataInput, ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return nil, errors.New("AccessDenied: not authorized")
}

func TestReview_Overview_WithoutCloudWatchShowsANoteAndDoesNotRetryEachLoad(t *testing.T) {
	t.Parallel()
	f := &failingMetrics{}
	r := newRig(t, "none", func(c *console.Config) { c.Metrics = &console.Metrics{API: f, Namespace: "Outflow"} })
	for range 3 {
		status, body, _ := do(t, "GET", r.url+"/", "", nil, nil)
		require.Equal(t, 200, status)
		require.Contains(t, body, "CloudWatch cannot be read")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, 1, f.calls, "a failed read is remembered for the chart period like a good one")
}

func TestReview_Refresh_FasterThanTheMinimumIsRefused(t *testing.T) {
	t.Parallel()
	_, err := console.New(console.Config{Operator: &dynamo.Operator{}, Ordered: func(context.Context) (map[string]outbox.DeadHead, error) { return nil, nil },
		Addr: "127.0.0.1:1", Refresh: 5 * time.Second})
	require.Error(t, err)
}

func TestReview_DeadList_FiltersAndPagesNewestFirstEachOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f.fifo", nil)
	now := time.Now().Truncate(time.Millisecond)
	var want []string
	for i := range 130 {
		// Groups of 7 share a millisecond, so some pages end inside one.
		at := now.Add(-time.Minute - time.Duration(i/7)*time.Second)
		k := fmt.Sprintf("pg-%03d", i)
		r.put(t, deadRow(k, "pq", at, []byte("x")), nil)
		want = append(want, k)
	}
	r.put(t, deadRow("young", "ages", now.Add(-10*time.Minute), []byte("x")), nil)
	r.put(t, deadRow("mid", "ages", now.Add(-2*time.Hour), []byte("x")), nil)
	r.put(t, deadRow("old", "ages", now.Add(-48*time.Hour), []byte("x")), nil)
	for i, g := range []string{"ga", "gb", "ga"} {
		row := deadRow(fmt.Sprintf("f-%d-%s", i, g), "f.fifo", now.Add(-time.Duration(i)*time.Hour), []byte("x"))
		row.Group, row.Seq = g, 1
		r.put(t, row, nil)
	}
	keysOf := func(body string) []string {
		var ks []string
		for _, part := range strings.Split(body, `<a href="/row?key=`)[1:] {
			ks = append(ks, part[:strings.Index(part, `"`)])
		}
		return ks
	}
	// Paging: each dead letter exactly once, newest first.
	var got []string
	next := "/dead?queue=pq"
	for pages := 0; next != "" && pages < 10; pages++ {
		status, body, _ := do(t, "GET", r.url+strings.ReplaceAll(next, "&amp;", "&"), "", nil, nil)
		require.Equal(t, 200, status)
		got = append(got, keysOf(body)...)
		next = ""
		if i := strings.Index(body, `<a href="/dead?`); i >= 0 {
			rest := body[i+len(`<a href="`):]
			next = rest[:strings.Index(rest, `"`)]
		}
	}
	require.ElementsMatch(t, want, got)
	for i := 1; i < len(got); i++ {
		var a, b int
		_, _ = fmt.Sscanf(got[i-1], "pg-%d", &a)
		_, _ = fmt.Sscanf(got[i], "pg-%d", &b)
		require.LessOrEqual(t, a/7, b/7, "newest first: %v", got)
	}
	for _, tt := range []struct {
		q    string
		want []string
	}{
		{"queue=ages&within=1h", []string{"young"}},
		{"queue=ages&older=1h", []string{"mid", "old"}},
		{"queue=ages&within=24h&older=1h", []string{"mid"}},
		{"queue=f.fifo&group=ga", []string{"f-0-ga", "f-2-ga"}},
		{"group=gb", []string{"f-1-gb"}},
	} {
		_, body, _ := do(t, "GET", r.url+"/dead?"+tt.q, "", nil, nil)
		require.Equal(t, tt.want, keysOf(body), tt.q)
	}
	status, _, _ := do(t, "POST", r.url+"/redrive", "", url.Values{"key": make([]string, 0), "queue": {"pq"}, "csrf": {r.c.CSRF()}, "x": {"1"}}, nil)
	require.Equal(t, 200, status)
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	status, _, _ = do(t, "POST", r.url+"/redrive", "", url.Values{"key": many, "csrf": {r.c.CSRF()}}, nil)
	require.Equal(t, http.StatusBadRequest, status, "more than 1000 keys refused")
}

func TestReview_PurgeConfirmed_SkipsARowThatFailedAgainAfterTheConfirmation(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	now := time.Now()
	r.put(t, deadRow("again", "q", now.Add(-time.Hour), []byte("x")), nil)
	_, body, _ := do(t, "POST", r.url+"/purge", "", url.Values{"key": {"again"}, "csrf": {r.c.CSRF()}}, nil)
	i := strings.Index(body, `name="at" value="`)
	require.GreaterOrEqual(t, i, 0, body)
	rest := body[i+len(`name="at" value="`):]
	at := rest[:strings.Index(rest, `"`)]
	// Meanwhile someone redrives it and it fails again, for another reason.
	r.put(t, deadRow("again", "q", now.Add(time.Second), []byte("x")), nil)
	_, body, _ = do(t, "POST", r.url+"/purge", "", url.Values{"key": {"again"}, "csrf": {r.c.CSRF()}, "confirm": {"yes"}, "at": {at}}, nil)
	require.Contains(t, body, "skipped 1", "the dead letter confirmed is gone; the one there now was never shown")
	require.Equal(t, outbox.StatusFailed, r.status(t, "again"))
}

func TestReview_ConcurrentRedrives_RedriveOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	r.put(t, deadRow("race", "q", time.Now(), []byte("x")), nil)
	bodies := make(chan string, 2)
	for range 2 {
		go func() {
			res, err := http.PostForm(r.url+"/redrive", url.Values{"key": {"race"}, "csrf": {r.c.CSRF()}})
			if err != nil {
				bodies <- err.Error()
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			bodies <- string(b)
		}()
	}
	all := <-bodies + <-bodies
	require.Equal(t, 1, strings.Count(all, "Redriven 1, skipped 0"), all)
	require.Equal(t, 1, strings.Count(all, "Redriven 0, skipped 1"), all)
}

func TestReview_OversizedPOST_IsRefusedAsTooLargeNotAsACSRFFailure(t *testing.T) {
	t.Parallel()
	r := newRig(t, "none", nil)
	keys := make([]string, 600)
	for i := range keys {
		keys[i] = fmt.Sprintf("%04d-%s", i, strings.Repeat("k", 2000))
	}
	status, body, _ := do(t, "POST", r.url+"/purge", "", url.Values{"csrf": {r.c.CSRF()}, "key": keys}, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
}
