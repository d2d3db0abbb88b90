package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// env is a table and an "orders" queue, and the command environment for them.
type env struct {
	table, orders string
	vars          map[string]string
	store         *dynamo.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{table: awstest.NewTable(t), orders: awstest.NewQueue(t, false)}
	e.vars = map[string]string{
		"OUTFLOW_TABLE":    e.table,
		"AWS_ENDPOINT_URL": awstest.Endpoint(),
		"AWS_REGION":       "us-east-1",
		"OUTFLOW_ROUTES":   "orders=" + e.orders,
	}
	var err error
	e.store, err = dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: e.table, Shards: 4})
	require.NoError(t, err)
	return e
}

type result struct {
	stdout, stderr string
	code           int
}

func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Execute(context.Background(), args, &out, &errb, func(k string) string { return e.vars[k] })
	return result{out.String(), errb.String(), code}
}

func (e *env) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := e.run(t, args...)
	require.Equal(t, cli.ExitOK, r.code, "outflow %v: %s", args, r.stderr)
	return r.stdout
}

// deadLetters stages n rows on a queue with no route and sweeps them into
// dead letters, with a budget of one attempt: a row with no route is
// retried until its budget is spent.
func (e *env) deadLetters(t *testing.T, queue string, n int) []string {
	t.Helper()
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: e.table, Shards: 4})
	require.NoError(t, err)
	rows := make([]outflow.Row, n)
	for i := range rows {
		rows[i] = outflow.Row{Key: fmt.Sprintf("%s-%04d", queue, i), Queue: queue, Payload: []byte(`{"secret":"s3cr3t"}`)}
	}
	keys, err := p.Put(context.Background(), rows...)
	require.NoError(t, err)
	var sum struct {
		DeadLettered int `json:"dead_lettered"`
	}
	e.vars["OUTFLOW_MAX_ATTEMPTS"] = "1"
	defer delete(e.vars, "OUTFLOW_MAX_ATTEMPTS")
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "sweep", "--output", "json")), &sum))
	require.Equal(t, n, sum.DeadLettered)
	return keys
}

func (e *env) status(t *testing.T, key string) outbox.Status {
	t.Helper()
	row, err := e.store.Get(context.Background(), key)
	require.NoError(t, err)
	if row == nil {
		return ""
	}
	return row.Status
}

func TestDeadList_ShowsNewestFirstAndParsesAsJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deadLetters(t, "ghost", 3)

	table := e.ok(t, "dead", "list")
	require.Contains(t, table, "KEY")
	require.Contains(t, table, "ghost-0000")
	require.Contains(t, table, `no route for queue "ghost"`)

	var list []dynamo.DeadRef
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "list", "--output", "json", "--queue", "ghost")), &list))
	require.Len(t, list, 3)
	for i := 1; i < len(list); i++ {
		require.False(t, list[i].FailedAt.After(list[i-1].FailedAt), "newest first")
	}
	require.Equal(t, 1, list[0].Attempt)

	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "list", "--output", "json", "--limit", "2")), &list))
	require.Len(t, list, 2)
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "list", "--output", "json", "--queue", "other")), &list))
	require.Empty(t, list)
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "list", "--output", "json", "--since", "1h")), &list))
	require.Len(t, list, 3)

	r := e.run(t, "dead", "list", "--output", "yaml")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "--output must be table or json")
	r = e.run(t, "dead", "list", "--table", "")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "no table")
}

func TestDeadShow_HidesThePayloadUnlessAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deadLetters(t, "ghost", 1)

	out := e.ok(t, "dead", "show", "ghost-0000")
	require.Contains(t, out, "failed")
	require.Contains(t, out, `no route for queue "ghost"`)
	require.Contains(t, out, "(19 bytes; --payload to show)")
	require.NotContains(t, out, "s3cr3t")

	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "show", "ghost-0000", "--output", "json")), &shown))
	require.NotContains(t, shown, "payload")
	require.Len(t, shown["errors"], 1)

	require.Contains(t, e.ok(t, "dead", "show", "ghost-0000", "--payload"), `{"secret":"s3cr3t"}`)

	r := e.run(t, "dead", "show", "nope")
	require.Equal(t, cli.ExitError, r.code)
	require.Contains(t, r.stderr, `no row with key "nope"`)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line")
	require.Equal(t, cli.ExitUsage, e.run(t, "dead", "show").code)
}

// A redrive gives a row a fresh budget, so its history's attempts count
// from 1 again: two "#1" lines read as one attempt recorded twice unless
// the history says where the redrive fell.
func TestDeadShow_MarksWhereARedriveRestartedTheAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deadLetters(t, "ghost", 1)
	require.NotContains(t, e.ok(t, "dead", "show", "ghost-0000"), "redriven")

	e.ok(t, "dead", "redrive", "ghost-0000")
	e.vars["OUTFLOW_MAX_ATTEMPTS"] = "1"
	e.ok(t, "sweep")
	delete(e.vars, "OUTFLOW_MAX_ATTEMPTS")
	require.Equal(t, outbox.StatusFailed, e.status(t, "ghost-0000"), "dead again after its redrive")

	out := e.ok(t, "dead", "show", "ghost-0000")
	require.Regexp(t, `\nredriven +\d{4}-`, out)
	require.Regexp(t, `\n  #1 +\S+  no route[^\n]*\n  -- +redriven: attempts count from 1 again\n  #1 +\S+  no route`, out)

	var shown operate.Row
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "show", "ghost-0000", "--output", "json")), &shown))
	require.False(t, shown.RedrivenAt.IsZero())
	require.Len(t, shown.Errors, 2)
	require.False(t, shown.Errors[0].Redriven)
	require.True(t, shown.Errors[1].Redriven)
}

func TestDeadRedrive_MovesOnlyFailedRowsAndDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.deadLetters(t, "ghost", 3)
	_, err := e.store.Get(context.Background(), keys[0])
	require.NoError(t, err)

	out := e.ok(t, "dead", "redrive", "--all", "--dry-run")
	require.Contains(t, out, "dry run: would redrive 3 row(s)")
	require.Equal(t, outbox.StatusFailed, e.status(t, keys[0]))

	out = e.ok(t, "dead", "redrive", keys[0], "missing-key")
	require.Contains(t, out, "redriven 1, skipped 1")
	require.Equal(t, outbox.StatusPending, e.status(t, keys[0]))

	var res struct{ Done, Skipped int }
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "redrive", "--queue", "ghost", "--output", "json")), &res))
	require.Equal(t, 2, res.Done)

	r := e.run(t, "dead", "redrive")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "name the rows")
	require.Equal(t, cli.ExitUsage, e.run(t, "dead", "redrive", "k", "--all").code)
}

func TestDeadRedrive_AThousandDeadLettersAllGoOutOnTheNextSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	routes := e.vars["OUTFLOW_ROUTES"]
	e.vars["OUTFLOW_ROUTES"] = "other=" + e.orders // "orders" has no route yet
	e.deadLetters(t, "orders", 1000)
	e.vars["OUTFLOW_ROUTES"] = routes

	r := e.run(t, "dead", "redrive", "--all")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "redriven 1000, skipped 0")
	require.Contains(t, r.stderr, "1000/1000", "a progress bar")

	var sum struct {
		Delivered int `json:"delivered"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "sweep", "--output", "json")), &sum))
	require.Equal(t, 1000, sum.Delivered)
	attrs, err := awstest.SQS(t).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(e.orders), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	require.NoError(t, err)
	require.Equal(t, "1000", attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	var list []dynamo.DeadRef
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "list", "--output", "json", "--limit", "0")), &list))
	require.Empty(t, list)
}

func TestDeadPurge_RefusesWithoutYesAndDeletesOnlyDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.deadLetters(t, "ghost", 2)
	live := e.ok(t, "enqueue", "--queue", "orders", "--body", "x", "--key", "live", "--delay", "1h")
	require.Contains(t, live, "staged live")

	r := e.run(t, "dead", "purge", "--all")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "--yes")
	require.Equal(t, outbox.StatusFailed, e.status(t, keys[0]), "nothing changed")
	require.Equal(t, outbox.StatusFailed, e.status(t, keys[1]))

	r = e.run(t, "dead", "purge", "--queue", "ghost", "--older-than", "1h", "--yes")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "purged 0 of those failed more than 1h0m0s ago", "none is that old, and the report says why")

	out := e.ok(t, "dead", "purge", keys[0], "live", "--yes")
	require.Contains(t, out, "purged 1, skipped 1")
	require.Equal(t, outbox.Status(""), e.status(t, keys[0]))
	require.Equal(t, outbox.StatusPending, e.status(t, "live"), "a pending row is never purged")

	require.Contains(t, e.ok(t, "dead", "purge", "--all", "--yes"), "purged 1")
}

func TestEnqueue_StagesValidRowsAndExplainsBadOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var res struct{ Key, Queue string }
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "enqueue", "--queue", "orders", "--body", `{"a":1}`, "--attr", "type=created", "--output", "json")), &res))
	require.Len(t, res.Key, 26)
	row, err := e.store.Get(context.Background(), res.Key)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"type": "created"}, row.Attributes)

	f := t.TempDir() + "/body.bin"
	require.NoError(t, os.WriteFile(f, []byte{0, 1, 2}, 0o600))
	e.ok(t, "enqueue", "--queue", "events.fifo", "--body-file", f, "--group", "g1", "--key", "fifo-1", "--routes", "events.fifo=http://localhost:1/q.fifo")
	row, err = e.store.Get(context.Background(), "fifo-1")
	require.NoError(t, err)
	require.Equal(t, []byte{0, 1, 2}, row.Payload)

	tp := "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	e.ok(t, "enqueue", "--queue", "domain", "--body", `{"id":1}`, "--key", "event-1", "--traceparent", tp,
		"--routes", "domain=bus?source=app&detail-type=T")
	row, err = e.store.Get(context.Background(), "event-1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"traceparent": tp}, row.Attributes)

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"enqueue", "--body", "x"}, cli.ExitUsage, `required flag(s) "queue" not set`},
		{[]string{"enqueue", "--queue", "orders"}, cli.ExitUsage, "exactly one of --body and --body-file"},
		{[]string{"enqueue", "--queue", "orders", "--body", ""}, cli.ExitUsage, "--body is empty: a row needs a payload"},
		{[]string{"enqueue", "--queue", "orders", "--body", "x", "--attr", "novalue"}, cli.ExitUsage, "want name=value"},
		{[]string{"enqueue", "--queue", "events.fifo", "--body", "x", "--routes", "events.fifo=http://localhost:1/q.fifo"}, cli.ExitUsage, "FIFO queue needs a message group"},
		{[]string{"enqueue", "--queue", "events.fifo", "--body", "x", "--group", "g"}, cli.ExitError, "no such route"},
		{[]string{"enqueue", "--queue", "orders", "--body", "x", "--key", "fifo-1"}, cli.ExitError, "key already staged with different content"},
		{[]string{"enqueue", "--queue", "orders", "--body", "x", "--delay", "soon"}, cli.ExitUsage, "invalid argument"},
		{[]string{"enqueue", "--queue", "orders", "--body", "x", "--traceparent", "nope"}, cli.ExitError, "not a W3C traceparent"},
		{[]string{"enqueue", "--queue", "domain", "--body", "x", "--routes", "domain=bus?source=app&detail-type=T"}, cli.ExitError, "payload is not a JSON object"},
		{[]string{"enqueue", "--queue", "domain", "--body", "{}", "--routes", "domain=arn:aws:events:us-east-1:123456789012:event-bus/bus"}, cli.ExitError, "no source"},
		{[]string{"enqueue", "--queue", "orders", "--body", "x", "--routes", "domain=arn:aws:events:us-east-1:123456789012:event-bus/bus"}, cli.ExitError, "no such route"},
		{[]string{"enqueue", "--queue", "orders", "--body", "x", "--routes", "orders=nowhere/q"}, cli.ExitUsage, `route "orders"`},
	} {
		r := e.run(t, tt.args...)
		require.Equal(t, tt.code, r.code, "%v: %s", tt.args, r.stderr)
		require.Contains(t, r.stderr, tt.want, tt.args)
	}
}

// backlog stages what the stats tests count: two dead letters of "ghost"
// and, on "orders", three rows due in an hour, one due now and one due now
// and claimed.
func (e *env) backlog(t *testing.T) {
	t.Helper()
	e.deadLetters(t, "ghost", 2)
	for i := range 3 {
		e.ok(t, "enqueue", "--queue", "orders", "--body", "x", "--key", "later-"+strconv.Itoa(i), "--delay", "1h")
	}
	e.ok(t, "enqueue", "--queue", "orders", "--body", "x", "--key", "now-1")
	e.ok(t, "enqueue", "--queue", "orders", "--body", "x", "--key", "now-2")
	_, err := e.store.Claim(context.Background(), "now-2", time.Now(), time.Minute, 8)
	require.NoError(t, err)
}

func TestStats_ExactCountsPendingClaimedAndFailedFromTheRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.backlog(t)

	var st struct {
		Queues         map[string]dynamo.Counts
		Shards         map[string]dynamo.Counts
		Total          dynamo.Counts
		OldestDueAgeMs int64 `json:"oldest_due_age_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "stats", "--exact", "--output", "json")), &st))
	require.Equal(t, dynamo.Counts{Pending: 4, Due: 1, Claimed: 1}, st.Queues["orders"])
	require.Equal(t, dynamo.Counts{Failed: 2}, st.Queues["ghost"])
	require.Equal(t, dynamo.Counts{Pending: 4, Due: 1, Claimed: 1, Failed: 2}, st.Total)
	shardTotal := 0
	for _, c := range st.Shards {
		shardTotal += c.Pending + c.Claimed
	}
	require.Equal(t, 5, shardTotal)
	require.GreaterOrEqual(t, st.OldestDueAgeMs, int64(0))

	table := e.ok(t, "stats", "--exact")
	require.Contains(t, table, "QUEUE")
	require.Contains(t, table, "SHARD")
	require.Contains(t, table, "CLAIMED")
}

func TestStats_CountsDueLaterAndFailedWithCountQueriesByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.backlog(t)

	tests := []struct {
		name  string
		args  []string
		unset bool // no OUTFLOW_ROUTES
		want  countedStats
	}{
		{
			name: "the routes' dead queues, with ghost named",
			args: []string{"--queues", "ghost"},
			want: countedStats{
				Queues: map[string]dynamo.Counts{"orders": {}, "ghost": {Failed: 2}, "(none)": {}},
				Total:  dynamo.Counts{Pending: 5, Due: 2, Failed: 2}, Cap: dynamo.DefaultCountCap, DeadCounted: "queues",
			},
		},
		{
			name: "the routes alone miss a queue with no route",
			want: countedStats{
				Queues: map[string]dynamo.Counts{"orders": {}, "(none)": {}},
				Total:  dynamo.Counts{Pending: 5, Due: 2}, Cap: dynamo.DefaultCountCap, DeadCounted: "queues",
			},
		},
		{
			name:  "a scan of the dead index without routes",
			unset: true,
			want: countedStats{
				Queues: map[string]dynamo.Counts{"ghost": {Failed: 2}},
				Total:  dynamo.Counts{Pending: 5, Due: 2, Failed: 2}, Cap: dynamo.DefaultCountCap, DeadCounted: "scan",
			},
		},
		{
			name: "a cap makes lower bounds",
			args: []string{"--cap", "1", "--queues", "ghost"},
			want: countedStats{
				Queues: map[string]dynamo.Counts{"orders": {}, "ghost": {Failed: 1, AtLeast: true}, "(none)": {}},
				// One row or none a shard bucket: not past the cap.
				Total: dynamo.Counts{Pending: 5, Due: 2, Failed: 1, AtLeast: true}, Cap: 1, AtLeast: true, DeadCounted: "queues",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := *e
			if tt.unset {
				e.vars = map[string]string{"OUTFLOW_TABLE": e.table, "AWS_ENDPOINT_URL": awstest.Endpoint(), "AWS_REGION": "us-east-1"}
				require.Contains(t, e.ok(t, "stats"), "no routes known")
			}
			var st countedStats
			require.NoError(t, json.Unmarshal([]byte(e.ok(t, append([]string{"stats", "--output", "json"}, tt.args...)...)), &st))
			require.Len(t, st.Shards, 4)
			require.Positive(t, st.OldestDueAgeMs)
			st.Shards, st.OldestDueAgeMs = nil, 0
			require.Equal(t, tt.want, st)
		})
	}
	table := e.ok(t, "stats", "--cap", "1", "--queues", "ghost")
	require.Contains(t, table, "DUE NOW")
	require.Regexp(t, `\nghost\s+≥1\n`, table)
	require.Regexp(t, `\ntotal\s+2\s+3\n`, table, "the shards' counts were not capped")
	require.Contains(t, table, "counts capped at")
	require.Regexp(t, `blocked ordered groups\s+not counted \(--blocked\)`, table)
}

// countedStats is what outflow stats --output json says by default.
type countedStats struct {
	Queues         map[string]dynamo.Counts
	Shards         map[string]dynamo.Counts
	Total          dynamo.Counts
	Exact          bool   `json:"exact"`
	Cap            int    `json:"cap"`
	AtLeast        bool   `json:"at_least"`
	DeadCounted    string `json:"dead_counted"`
	OldestDueAgeMs int64  `json:"oldest_due_age_ms"`
}

func TestSweep_NeedsRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	delete(e.vars, "OUTFLOW_ROUTES")
	r := e.run(t, "sweep")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "OUTFLOW_ROUTES is required")
}

// putStray writes a due pending row by hand, as a producer in another
// language would, on the given shard.
func (e *env) putStray(t *testing.T, key, shard string) {
	t.Helper()
	now := &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)}
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: key}, "queue": &ddbtypes.AttributeValueMemberS{Value: "orders"},
		"payload": &ddbtypes.AttributeValueMemberS{Value: "x"}, "status": &ddbtypes.AttributeValueMemberS{Value: "pending"},
		"attempt": &ddbtypes.AttributeValueMemberN{Value: "0"}, "created_at": now,
		"due_at": now, "shard": &ddbtypes.AttributeValueMemberS{Value: shard},
	}})
	require.NoError(t, err)
}

func TestSweep_WithAuditAuditsFirstAndDeliversStrayRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putStray(t, "stray-7", "7")
	e.putStray(t, "stray-x", "x")
	var sum struct {
		Delivered int `json:"delivered"`
		StrayRows int `json:"stray_rows"`
	}
	r := e.run(t, "sweep", "--audit", "--output", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	require.Equal(t, 2, sum.Delivered)
	require.Equal(t, 2, sum.StrayRows)
	require.Contains(t, r.stderr, `"msg":"stray row: its shard is never swept","key":"stray-x","shard":"x"`)
	require.Contains(t, e.ok(t, "sweep"), "STRAY")
}

// The audit moves every row outside shards 0..--shards-1: run from a shell
// whose --shards (4 by default) is not the dispatcher's (8, say), it would
// rewrite valid rows and record them as stray where stats and the
// function read. So outflow sweep audits only when asked (found by review
// 13b).
func TestSweep_AuditsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t) // no OUTFLOW_SHARDS: the CLI's --shards is 4
	e.putStray(t, "legit-5", "5")
	e.putStray(t, "legit-6", "6")
	r := e.run(t, "sweep", "--output", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	counts, err := e.store.Audited(ctx)
	require.NoError(t, err)
	require.Zero(t, counts.Total, "no audit ran: %+v", counts)
	row, err := e.store.Get(ctx, "legit-5")
	require.NoError(t, err)
	require.NotNil(t, row)
	require.Equal(t, outbox.StatusPending, row.Status, "left on its shard for the dispatcher that sweeps it")
}

func TestStats_ReportsWhatTheAuditFoundOfStrayRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.ok(t, "enqueue", "--queue", "orders", "--body", "x", "--key", "swept")
	// A producer configured with 8 shards writes shard "7"; stats reads
	// shards 0 to 3 and cannot see it.
	e.putStray(t, "stray", "7")
	stats := func() dynamo.Stats {
		var st dynamo.Stats
		require.NoError(t, json.Unmarshal([]byte(e.ok(t, "stats", "--output", "json")), &st))
		return st
	}
	st := stats()
	require.Equal(t, 1, st.Total.Pending, "the stray row is on no shard stats reads")
	require.Equal(t, dynamo.AuditCounts{}, st.Stray, "no audit has run")

	a, err := dynamo.NewAudit(awstest.DynamoDB(t), dynamo.Config{Table: e.table, Shards: 4})
	require.NoError(t, err)
	res, err := a.Run(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, res.Moved)
	st = stats()
	require.Equal(t, 2, st.Total.Pending, "moved where the sweep, and stats, read it")
	require.Equal(t, dynamo.AuditCounts{LastPass: 1, Total: 1}, st.Stray)
	table := e.ok(t, "stats")
	require.Contains(t, table, "stray rows found by the audit  1 last pass, 0 this pass, 1 in all")
}

func TestSweep_PartitionSweepsOnlyItsShards(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for s := range 4 {
		e.putStray(t, "on-"+strconv.Itoa(s), strconv.Itoa(s))
	}
	var sum struct {
		Delivered int    `json:"delivered"`
		Partition string `json:"partition"`
	}
	r := e.run(t, "sweep", "--partition", "1/2", "--output", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	require.Equal(t, 2, sum.Delivered, "shards 1 and 3")
	require.Equal(t, "1/2", sum.Partition)
	for key, left := range map[string]bool{"on-0": true, "on-1": false, "on-2": true, "on-3": false} {
		row, err := e.store.Get(context.Background(), key)
		require.NoError(t, err)
		require.NotNil(t, row, "a delivered row is kept as done (OUTFLOW_DONE_RETENTION's default)")
		require.Equal(t, left, row.Status == outbox.StatusPending, key)
	}
}

func TestSweep_RefusesAPartitionThatDoesNotFit(t *testing.T) {
	t.Parallel()
	tests := []struct{ partition, want string }{
		{"1/8", "--partition: 8 partitions of 4 shards"},
		{"2/2", "--partition: partition 2 of 2"},
		{"one", `partition "one": want index/count`},
	}
	for _, tt := range tests {
		t.Run(tt.partition, func(t *testing.T) {
			t.Parallel()
			r := newEnv(t).run(t, "sweep", "--partition", tt.partition)
			require.Equal(t, cli.ExitUsage, r.code)
			require.Contains(t, r.stderr, tt.want)
		})
	}
}

// TestSweep_RunsUnderADeadlineShorterThanTheLease: as the functions do, a
// shell's sweep ends before the lease of any row it claimed, so a claim
// never outlives the sweep that holds it. A --timeout that does not leave
// the lease longer is refused before anything is read.
func TestSweep_RunsUnderADeadlineShorterThanTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name    string
		timeout string
		want    string
	}{
		{"as long as the lease", "5m", "lease (5m0s) must be longer than the invocation timeout (5m0s)"},
		{"longer than the lease", "1h", "must be longer than the invocation timeout (1h0m0s)"},
		{"inside the deadline margin", "5s", "deadline margin (10s) must be shorter than the invocation timeout (5s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run(t, "sweep", "--timeout", tt.timeout)
			require.Equal(t, cli.ExitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tt.want)
		})
	}
	var sum struct {
		Stopped string `json:"stopped"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "sweep", "--output", "json", "--timeout", "4m")), &sum))
	require.Equal(t, "drained", sum.Stopped)
}

// proxyAWS points the command's AWS calls at a proxy to moto that calls
// hook with each call's operation (its X-Amz-Target, as
// "DynamoDB_20120810.Scan") and request body before forwarding it: how a
// test acts at a chosen point of a command's run (after its first page,
// after its 50th write), counted in calls rather than timed. hook runs on
// the proxy's goroutines, never the test's: it must not call require or
// t.Fatal (FailNow is for the test's goroutine); it records what went
// wrong, and the test asserts it.
func (e *env) proxyAWS(t *testing.T, hook func(op string, body []byte)) {
	t.Helper()
	target, err := url.Parse(awstest.Endpoint())
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		hook(r.Header.Get("X-Amz-Target"), body)
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.vars["AWS_ENDPOINT_URL"] = srv.URL
}

// A dead letter whose last send ended unsure (a timeout) may still land
// until the dispatcher's unsure wait has passed since its unsure_at: a
// purge holds it until then, reading the wait the dispatcher published,
// else the longest any dispatcher has.
func TestDeadPurge_HoldsADeadLetterWhoseSendMayStillLand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	unsureAt := time.Now().Add(-2 * time.Minute).Truncate(time.Millisecond)
	require.NoError(t, e.store.Stage(ctx, outbox.Row{Key: "timed-out", Queue: "orders", Payload: []byte(`{}`)}, unsureAt))
	row, err := e.store.Claim(ctx, "timed-out", unsureAt, time.Minute, 1)
	require.NoError(t, err)
	row.UnsureAt = unsureAt
	require.NoError(t, e.store.DeadLetter(ctx, row, unsureAt, []outbox.AttemptError{{At: unsureAt, Attempt: 1, Message: "send: timeout", Unsure: true}}))

	// Nothing published: the longest wait any dispatcher has.
	out := e.ok(t, "dead", "purge", "timed-out", "--yes")
	require.Contains(t, out, "purged 0, skipped 0 (not dead letters)\nheld 1: a send of theirs ended unsure and may still land until "+unsureAt.Add(outbox.MaxUnsureWait+time.Second-1).Truncate(time.Second).UTC().Format(time.RFC3339))
	require.Equal(t, outbox.StatusFailed, e.status(t, "timed-out"))
	var res operate.Result
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "purge", "timed-out", "--yes", "--output", "json")), &res))
	require.Equal(t, 1, res.Held)

	// A published wait no dispatcher can have (under CallTimeout's least,
	// 1 s, plus a minute) is not trusted: still the longest.
	publish := func(wait time.Duration) {
		t.Helper()
		_, err = dynamo.Publish(ctx, awstest.DynamoDB(t), e.table, dynamo.Published{
			Routes: map[string]string{"orders": e.orders}, Ordered: map[string]string{}, Shards: 4, MaxMessageBytes: 262144, UnsureWait: wait,
		}, "outflow-sweep", time.Now())
		require.NoError(t, err)
	}
	publish(5 * time.Second)
	require.Contains(t, e.ok(t, "dead", "purge", "timed-out", "--yes"), "held 1")

	// The dispatcher published the shortest wait, 61 s: 2 min on, nothing
	// can land.
	publish(outbox.MinUnsureWait)
	require.Contains(t, e.ok(t, "dead", "purge", "timed-out", "--yes"), "purged 1, skipped 0")
	require.Equal(t, outbox.Status(""), e.status(t, "timed-out"))
}

// A lean stack whose stream was down: outflow sweep --backstop finds its
// rows over the whole table and delivers them in the same run; without
// the flag they stay where no sweep sees them.
func TestSweep_WithBackstopDeliversLeanRowsTheStreamMissed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.putLean(t, "lean-1", time.Now().Add(-time.Minute))
	e.putLean(t, "lean-2", time.Now().Add(-time.Minute))
	var sum struct {
		Delivered  int `json:"delivered"`
		MissedRows int `json:"missed_rows"`
	}
	r := e.run(t, "sweep", "--output", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	require.Zero(t, sum.Delivered, "no sweep sees a row with no shard")

	r = e.run(t, "sweep", "--backstop", "--output", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	require.Equal(t, 2, sum.Delivered)
	require.Equal(t, 2, sum.MissedRows)
	require.Contains(t, r.stderr, `"msg":"lean row the stream never delivered: put in the due index","key":"lean-1"`)
	counts, err := e.store.Backstopped(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, counts.Total)
}
