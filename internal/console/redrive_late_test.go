package console_test

import (
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// A dead letter whose place's closing message may have reached the
// consumer is not redriven by the console's plain redrive, which says so
// and why, as outflow dead redrive does, and offers the redrive as late
// (--late), which moves it; its row page offers only that.
func TestRedrive_ARowWhosePlaceMayBeClosedIsRedrivenOnlyAsLateAndTheConsoleSaysWhy(t *testing.T) {
	t.Parallel()
	r := newRig(t, "q.fifo=skip", nil)
	failed := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	row := deadRow("maybe-closed", "q.fifo", failed, []byte("x"))
	row.Group, row.Seq, row.Closed = "g", 1, outbox.ClosedUnsure
	r.put(t, row, nil)

	// A row redriven as late before, failed again on a block route.
	again := deadRow("redriven-late", "q.fifo", failed, []byte("x"))
	again.Group, again.Seq, again.PlaceMaybeClosed = "h", 1, failed.Add(-time.Minute)
	r.put(t, again, nil)
	plain := deadRow("plain", "q.fifo", failed, []byte("x"))
	plain.Group, plain.Seq = "k", 1
	r.put(t, plain, nil)

	// Phase 1: the row page offers the late redrive only, and says why.
	for _, key := range []string{"maybe-closed", "redriven-late"} {
		_, page, _ := do(t, "GET", r.url+"/row?key="+key, "", nil, nil)
		require.Contains(t, page, `id="redrive-late"`, key)
		require.NotContains(t, page, `id="redrive"`, key)
		require.Contains(t, page, `id="may-have-closed"`, key)
	}
	_, page, _ := do(t, "GET", r.url+"/row?key=plain", "", nil, nil)
	require.Contains(t, page, `id="redrive"`)
	require.NotContains(t, page, `id="redrive-late"`)

	// Phase 2: a plain redrive leaves it, and says so.
	_, body, _ := do(t, "POST", r.url+"/redrive", "", url.Values{"key": {"maybe-closed"}, "csrf": {r.c.CSRF()}}, nil)
	require.Contains(t, body, "Redriven 0, skipped 0")
	require.Contains(t, body, `id="may-have-closed">Not redriven 1: the message closing the place of each may have reached the consumer`)
	require.Equal(t, outbox.StatusFailed, r.status(t, "maybe-closed"))

	// Phase 3: the form it offers redrives it as late.
	form := regexp.MustCompile(`(?s)<form method="post" action="/redrive" class="actions">(.*?)</form>`).FindStringSubmatch(body)
	require.NotNil(t, form, body)
	values := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(form[1], -1) {
		values.Add(m[1], m[2])
	}
	require.Equal(t, url.Values{"csrf": {r.c.CSRF()}, "key": {"maybe-closed"}, "at": values["at"], "late": {"yes"}}, values)
	_, body, _ = do(t, "POST", r.url+"/redrive", "", values, nil)
	require.Contains(t, body, "Redriven 1, skipped 0")
	require.NotContains(t, body, `id="may-have-closed"`)
	require.Equal(t, outbox.StatusPending, r.status(t, "maybe-closed"))
}
