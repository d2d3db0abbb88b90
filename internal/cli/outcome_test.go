package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/outbox"
)

// missingQueue is the URL of a queue that does not exist on the moto
// server: a send to it is refused with AWS.SimpleQueueService.NonExistentQueue.
func missingQueue(name string) string { return awstest.Endpoint() + "/000000000000/" + name }

// nonExistent is how the stored error of a real send to missingQueue
// begins: the code and message first (issue 50, item 5).
const nonExistent = "AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist."

// shownRow is dead show --output json, in part.
type shownRow struct {
	Status        string `json:"status"`
	Closed        string `json:"closed"`
	Outcome       string `json:"outcome"`
	OutcomeDetail string `json:"outcome_detail"`
	LastError     string `json:"last_error"`
}

func (e *env) show(t *testing.T, key string) shownRow {
	t.Helper()
	var s shownRow
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "show", key, "--output", "json")), &s))
	return s
}

// deadOutcomes is dead list --output json as key: outcome and last error.
func (e *env) deadOutcomes(t *testing.T) map[string][2]string {
	t.Helper()
	var list []struct {
		Key, Outcome string
		LastError    string `json:"last_error"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "list", "--output", "json")), &list))
	out := map[string][2]string{}
	for _, d := range list {
		out[d.Key] = [2]string{d.Outcome, d.LastError}
	}
	return out
}

// A purged head reads as purged, never delivered, in dead show (text and
// JSON), though its status is done once its closing message went; a
// purge whose closing message failed reads so in dead list and stats; and
// a real send to a queue that does not exist is stored with the AWS error
// code and message first, which dead list's shortened cell keeps
// (issue 50, items 4 and 5).
func TestDeadShowAndList_SayHowEachRowEndedAndLeadWithTheAWSErrorCode(t *testing.T) {
	t.Parallel()
	e := newOrderedEnv(t, "events.fifo") // block
	e.vars["OUTFLOW_ROUTES"] += ",missing=" + missingQueue("outflow-missing-queue")
	keys := e.stageGroup(t, "g")
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: e.table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	_, err = p.Put(context.Background(), outflow.Row{Key: "lost-1", Queue: "missing", Payload: []byte(`{}`)})
	require.NoError(t, err)
	e.vars["OUTFLOW_MAX_ATTEMPTS"] = "1"
	require.Equal(t, 2, e.sweep(t).DeadLettered, "the head is too large, lost-1's queue does not exist")
	delete(e.vars, "OUTFLOW_MAX_ATTEMPTS")

	dead := e.deadOutcomes(t)
	require.Equal(t, "dead-letter", dead[keys[0]][0])
	require.Equal(t, "dead-letter", dead["lost-1"][0])
	require.True(t, strings.HasPrefix(dead["lost-1"][1], nonExistent+" (send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: "),
		"code and message first, then the rest: %s", dead["lost-1"][1])
	require.Equal(t, 1, strings.Count(dead["lost-1"][1], "NonExistentQueue"), "the API error is said once")
	table := e.ok(t, "dead", "list")
	require.Regexp(t, `(?m)^KEY\s+QUEUE\s+GROUP\s+ATTEMPTS\s+FAILED\s+BLOCKS\s+OUTCOME\s+LAST ERROR$`, table)
	require.Regexp(t, `(?m)^lost-1\s+missing\s+-\s+1\s+\S+\s+-\s+dead-letter\s+`+strings.ReplaceAll(nonExistent, ".", `\.`)+` \(.*…$`, table)
	require.Contains(t, e.ok(t, "dead", "show", "lost-1"), "RequestID: ")

	e.ok(t, "dead", "purge", keys[0], "--yes")
	s := e.show(t, keys[0])
	require.Equal(t, "purging", s.Outcome, "pending, its closing message not yet sent")
	require.Equal(t, "pending", s.Status)

	require.Equal(t, 3, e.sweep(t).Delivered, "the closing message, then the two rows behind it")
	s = e.show(t, keys[0])
	require.Equal(t, "done", s.Status, "the closing message settles the row done")
	require.Equal(t, "purged", s.Closed)
	require.Equal(t, "purged", s.Outcome, "yet it was purged, not delivered")
	require.Contains(t, s.OutcomeDetail, "its own message was not delivered")
	text := e.ok(t, "dead", "show", keys[0])
	require.Regexp(t, `(?m)^outcome\s+purged: purged by an operator: its own message was not delivered; the message closing its place was sent in its stead`, text)
	require.Regexp(t, `(?m)^status\s+done \(closed: purged\)$`, text)
	require.Equal(t, "delivered", e.show(t, keys[1]).Outcome)
	require.Regexp(t, `(?m)^outcome\s+delivered: delivered$`, e.ok(t, "dead", "show", keys[1]))
	// A delivered row's tombstone holds no payload (issue 50, item 6):
	// said so, not shown as an empty one, even when asked for.
	require.Regexp(t, `(?m)^payload\s+not kept after delivery`, e.ok(t, "dead", "show", keys[1], "--payload"))
	var tomb struct {
		Dropped bool    `json:"payload_dropped"`
		Payload *string `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "show", keys[1], "--payload", "--output", "json")), &tomb))
	require.True(t, tomb.Dropped)
	require.Nil(t, tomb.Payload, "no empty payload stands for the dropped one")

	// A purge whose closing message is refused for good: the events
	// queue is gone, and one attempt is the budget.
	hkeys := e.stageGroup(t, "h")
	require.Equal(t, 1, e.sweep(t).DeadLettered)
	e.ok(t, "dead", "purge", hkeys[0], "--yes")
	_, err = awstest.SQS(t).DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(e.events)})
	require.NoError(t, err)
	e.vars["OUTFLOW_MAX_ATTEMPTS"] = "1"
	require.Zero(t, e.sweep(t).Delivered)
	delete(e.vars, "OUTFLOW_MAX_ATTEMPTS")
	dead = e.deadOutcomes(t)
	require.Equal(t, "purged-unsent", dead[hkeys[0]][0], "refused for certain: not sent")
	require.True(t, strings.HasPrefix(dead[hkeys[0]][1], nonExistent+" (its place's closing message: send batch: operation error SQS: SendMessageBatch"), dead[hkeys[0]][1])
	require.Regexp(t, `(?m)^`+hkeys[0]+`\s+events\.fifo\s+h\s+1\s+\S+\s+yes\s+purged-unsent\s+AWS\.SimpleQueueService\.NonExistentQueue`, e.ok(t, "dead", "list"))
	require.Equal(t, "purged-unsent", e.show(t, hkeys[0]).Outcome)

	var st struct {
		DeadOutcomes map[string]int `json:"dead_outcomes"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "stats", "--exact", "--output", "json")), &st))
	require.Equal(t, map[string]int{"dead-letter": 1, "purged-unsent": 1}, st.DeadOutcomes)
	require.Regexp(t, `(?m)^dead letters by outcome\s+dead-letter 1, purged-unsent 1$`, e.ok(t, "stats", "--exact"))
	require.Regexp(t, `(?m)^dead letters by outcome\s+not told apart \(--exact`, e.ok(t, "stats"))
	var counted map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "stats", "--output", "json")), &counted))
	require.NotContains(t, counted, "dead_outcomes", "count queries only: not read")
}

// A dead letter an older dispatcher stored with the SDK's error as it
// reads, cause last, is shown code first all the same, in dead list and
// dead show, text and JSON.
func TestDeadListAndShow_LeadWithTheCodeOfAnErrorStoredCauseLast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const old = "send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1, " + nonExistent
	const want = nonExistent + " (send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1)"
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	require.NoError(t, e.store.Stage(ctx, outbox.Row{Key: "old-1", Queue: "orders", Payload: []byte(`{}`)}, at))
	row, err := e.store.Claim(ctx, "old-1", at, time.Minute, 1)
	require.NoError(t, err)
	require.NoError(t, e.store.DeadLetter(ctx, row, at, []outbox.AttemptError{{At: at, Attempt: 1, Message: old}}))

	require.Equal(t, want, e.deadOutcomes(t)["old-1"][1])
	require.Equal(t, want, e.show(t, "old-1").LastError)
	require.Contains(t, e.ok(t, "dead", "list"), "dead-letter  "+nonExistent+" (s…")
	require.Contains(t, e.ok(t, "dead", "show", "old-1"), "  "+want+"\n")
}
