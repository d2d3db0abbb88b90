package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/outbox"
)

// The row page says how a row ended, not only its status: a purged head
// whose closing message went reads status done, yet its outcome is
// purged, never delivered, while a row delivered behind it reads
// delivered; the dead-letter list and the blocked groups name each dead
// letter's outcome. An error cut short in a table keeps its whole text in
// a details element (no script), led by the AWS error code of a real
// send to a queue that does not exist (issue 50, items 4 and 5).
func TestPages_SayHowEachRowEndedAndKeepTheWholeErrorReachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars["OUTFLOW_ROUTES"] += ",missing=" + awstest.Endpoint() + "/000000000000/outflow-missing-queue"
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: e.table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	_, err = p.Put(context.Background(), outflow.Row{Key: "lost-1", Queue: "missing", Payload: []byte(`{}`)})
	require.NoError(t, err)
	e.vars["OUTFLOW_MAX_ATTEMPTS"] = "1"
	require.Equal(t, 1, e.sweep(t).DeadLettered)
	delete(e.vars, "OUTFLOW_MAX_ATTEMPTS")
	c := e.serve(t, nil)
	get := func(path string) string {
		t.Helper()
		status, body, _ := do(t, "GET", c.url+path, "", nil, nil)
		require.Equal(t, http.StatusOK, status, body)
		return body
	}

	dead := get("/dead")
	require.Contains(t, dead, "<th>outcome</th>")
	require.Regexp(t, `(?s)<a href="/row\?key=lost-1">lost-1</a>.*?<td class="outcome" title="dead-lettered: its own message was not delivered, unless a send of it ended with its outcome unknown \(dead show says\)">dead-letter</td>`, dead)
	cell := regexp.MustCompile(`(?s)<a href="/row\?key=lost-1">.*?<td class="err">(.*?)</td></tr>`).FindStringSubmatch(dead)
	require.NotNil(t, cell, dead)
	require.True(t, strings.HasPrefix(cell[1], "<details><summary>AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (send batch"), cell[1])
	require.Regexp(t, `</summary>AWS\.SimpleQueueService\.NonExistentQueue: The specified queue does not exist\. \(send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: [^<]+\)</details>$`, cell[1])
	require.Regexp(t, `<td class="err">no route for queue &#34;ghost&#34;</td>`, dead, "a short error is shown whole, without a details element")

	groups := get("/groups")
	require.Contains(t, groups, "<th>outcome</th>")
	require.Contains(t, groups, `<td class="outcome" title="dead-lettered: its own message was not delivered, unless a send of it ended with its outcome unknown (dead show says)">dead-letter</td>`)

	head := e.group[0]
	require.Contains(t, get("/row?key="+head), `<td id="outcome" class="outcome-dead-letter"><strong>dead-letter</strong>`)
	status, body, _ := do(t, "POST", c.url+"/purge", "", map[string][]string{"key": {head}, "csrf": {c.CSRF()}, "confirm": {"yes"}}, nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Purged 1, skipped 0")
	require.Contains(t, get("/row?key="+head), `<strong>purging</strong>`)

	require.Equal(t, 3, e.sweep(t).Delivered, "the closing message, then the two rows behind it")
	require.Equal(t, outbox.StatusDone, e.status(t, head))
	row := get("/row?key=" + head)
	require.Contains(t, row, `<td id="outcome" class="outcome-purged"><strong>purged</strong>: purged by an operator: its own message was not delivered; the message closing its place was sent in its stead`)
	require.Contains(t, row, `<td id="status" class="status-done">done (closed: purged)</td>`)
	require.NotContains(t, row, "<strong>delivered</strong>")
	require.Contains(t, get("/row?key="+e.group[1]), `<td id="outcome" class="outcome-delivered"><strong>delivered</strong>: delivered</td>`)

	over := get("/?exact=1")
	require.Regexp(t, `id="dead-outcomes">Dead letters by outcome: dead-letter \d+;`, over)
	require.NotContains(t, get("/"), `id="dead-outcomes"`, "count queries only: not read")
}
