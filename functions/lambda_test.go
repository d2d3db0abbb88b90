// Package functions_test runs the built sweep and wake bootstraps under the
// Lambda Runtime Interface Emulator against the test AWS endpoint.
package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/stretchr/testify/assert"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/rie"
	"github.com/outflowhq/outflow/internal/streams"
	"github.com/outflowhq/outflow/internal/telemetry"
	"github.com/outflowhq/outflow/internal/version"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bootstrap builds the named function for this machine, once per run.
func bootstrap(t *testing.T, fn string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "outflow-bootstraps")
		for _, f := range []string{"sweep", "wake"} {
			if buildErr != nil {
				break
			}
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s", "-tags", "lambda.norpc", "-o", filepath.Join(binDir, f, "bootstrap"), "./"+f)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", f, err, out)
			}
		}
	})
	require.NoError(t, buildErr)
	return filepath.Join(binDir, fn, "bootstrap")
}

// stackEnv is a table and two queues with the function environment for them.
type stackEnv struct {
	table  string
	store  *dynamo.Store
	routes delivery.Routes
	env    []string
}

func newStack(t *testing.T) stackEnv {
	t.Helper()
	table := awstest.NewTable(t)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	routes := delivery.Routes{"orders": awstest.NewQueue(t, false), "events.fifo": awstest.NewQueue(t, true)}
	return stackEnv{table: table, store: store, routes: routes, env: []string{
		"OUTFLOW_TABLE=" + table,
		"OUTFLOW_ROUTES=" + routes.String(),
		"OUTFLOW_SHARDS=4",
		"OUTFLOW_WAKE_GRACE=0s",
		"AWS_ENDPOINT_URL=" + awstest.Endpoint(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
		"AWS_LAMBDA_LOG_LEVEL=DEBUG",
	}}
}

func start(t *testing.T, fn string, env []string) (*rie.Emulator, *syncBuffer) {
	t.Helper()
	path, err := rie.Path()
	require.NoError(t, err)
	logs := &syncBuffer{}
	emu, err := rie.Start(path, bootstrap(t, fn), env, logs)
	require.NoError(t, err)
	t.Cleanup(emu.Stop)
	return emu, logs
}

// syncBuffer is output goroutines write while the test reads it.
type syncBuffer = awstest.SyncBuffer

// logged waits until the function's logs hold each of want, and returns
// them. The emulator answers an invocation before the function's output
// has necessarily been copied through its pipe: a log read at once can
// miss the last lines (CI caught "wake skipped a stream record" missing).
func logged(t *testing.T, logs *syncBuffer, want ...string) string {
	t.Helper()
	require.Eventually(t, func() bool {
		text := logs.String()
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the logs never held %q:\n%s", want, logs)
	return logs.String()
}

// schedulerEvent is what EventBridge Scheduler sends a Lambda target.
const schedulerEvent = `{"version":"0","id":"5f1a3c3e-0000-4000-8000-000000000000","detail-type":"Scheduled Event","source":"aws.scheduler","account":"123456789012","time":"2026-12-02T09:00:00Z","region":"us-east-1","resources":["arn:aws:scheduler:us-east-1:123456789012:schedule/default/outflow-sweep"],"detail":"{}"}`

func TestSweepBootstrap_DeliversDueRowsUnderTheEmulator(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	payload := `{"order":42,"secret":"do-not-log"}`
	for i := range 12 {
		row := outbox.Row{Key: fmt.Sprintf("o-%d", i), Queue: "orders", Payload: []byte(payload), Attributes: map[string]string{"tenant": "acme-private"}}
		require.NoError(t, s.store.Stage(ctx, row, time.Now()))
	}
	for i := range 3 {
		row := outbox.Row{Key: fmt.Sprintf("e-%d", i), Queue: "events.fifo", Payload: []byte(payload), Group: "g"}
		require.NoError(t, s.store.Stage(ctx, row, time.Now()))
	}
	require.NoError(t, s.store.Stage(ctx, outbox.Row{Key: "lost", Queue: "nowhere", Payload: []byte("x")}, time.Now()))

	// A retry waits longer than the sweep can run: the row with no route
	// is tried once, however slow a loaded machine makes the sweep (with
	// the default 1 s, CI's sweep outlasted the backoff and retried it
	// twice).
	emu, logs := start(t, "sweep", append(s.env, "OUTFLOW_BACKOFF_BASE=10m"))
	out, err := emu.Invoke(ctx, []byte(schedulerEvent))
	require.NoError(t, err, logs.String())
	var sum telemetry.Summary
	require.NoError(t, json.Unmarshal(out, &sum))
	require.Equal(t, "sweep", sum.Function)
	require.Equal(t, 15, sum.Delivered)
	// A row with no route is retried (until its budget is spent), and
	// counted for the UnroutedRows alarm.
	require.Zero(t, sum.DeadLettered)
	require.Equal(t, 1, sum.Retried)
	require.Equal(t, 1, sum.UnroutedRows)
	require.Equal(t, "drained", sum.Stopped)

	require.Len(t, awstest.Receive(t, s.routes["orders"], 12, 20*time.Second), 12)
	require.Len(t, awstest.Receive(t, s.routes["events.fifo"], 3, 20*time.Second), 3)
	lost, err := s.store.Get(ctx, "lost")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, lost.Status)
	require.Equal(t, `no route for queue "nowhere"`, lost.LastError)

	// The function published the configuration it runs with.
	pub, err := dynamo.ReadPublished(ctx, awstest.DynamoDB(t), s.table)
	require.NoError(t, err)
	require.Equal(t, map[string]string(s.routes), pub.Routes)
	require.Equal(t, 4, pub.Shards)
	require.Equal(t, int64(1), pub.Revision)
	require.Equal(t, version.Version, pub.Version, "the built bootstrap publishes its release version")

	// The logs carry the summary and an EMF record, never payloads or attribute values.
	text := logged(t, logs, `"CloudWatchMetrics"`, `"sweep finished"`)
	require.NotContains(t, text, "do-not-log")
	require.NotContains(t, text, "acme-private")
}

func TestSweepBootstrap_InvalidConfigFailsInitNamingTheVariable(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	emu, logs := start(t, "sweep", append(s.env, "OUTFLOW_MAX_ATTEMPTS=zero"))
	_, err := emu.Invoke(context.Background(), []byte(schedulerEvent))
	require.Error(t, err)
	// The error is a JSON line at ERROR, which Lambda's log filter keeps at
	// every level.
	require.Eventually(t, func() bool {
		for line := range strings.Lines(logs.String()) {
			var doc struct{ Level, Msg, Error string }
			if json.Unmarshal([]byte(line), &doc) == nil && doc.Level == "ERROR" && doc.Msg == "init failed" &&
				strings.Contains(doc.Error, `OUTFLOW_MAX_ATTEMPTS="zero": not an integer`) {
				return true
			}
		}
		return false
	}, 5*time.Second, 50*time.Millisecond, logs.String())
}

func TestWakeBootstrap_DeliversRowsFromARealStreamRecord(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	desc, err := awstest.DynamoDB(t).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.store.Table())})
	require.NoError(t, err)
	arn := aws.ToString(desc.Table.LatestStreamArn)
	require.NotEmpty(t, arn)

	require.NoError(t, s.store.Stage(ctx, outbox.Row{Key: "w-1", Queue: "orders", Payload: []byte(`{"hello":"wake"}`)}, time.Now()))
	require.NoError(t, s.store.Stage(ctx, outbox.Row{Key: "w-later", Queue: "orders", Payload: []byte("x"), NotBefore: time.Now().Add(time.Hour)}, time.Now()))

	poller := streams.NewPoller(dynamodbstreams.NewFromConfig(awstest.TestConfig(t)), arn, streamtypes.ShardIteratorTypeTrimHorizon)
	var records []streamtypes.Record
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := poller.Poll(ctx, 100)
		require.NoError(c, err)
		records = append(records, got...)
		require.GreaterOrEqual(c, len(records), 2)
	}, 10*time.Second, 100*time.Millisecond)
	event, err := json.Marshal(streams.Event(arn, "us-east-1", records))
	require.NoError(t, err)

	emu, logs := start(t, "wake", s.env)
	out, err := emu.Invoke(ctx, event)
	require.NoError(t, err, logs.String())
	var resp events.DynamoDBEventResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Empty(t, resp.BatchItemFailures, "the wake never fails a batch")

	msgs := awstest.Receive(t, s.routes["orders"], 1, 20*time.Second)
	require.Len(t, msgs, 1)
	require.Equal(t, `{"hello":"wake"}`, aws.ToString(msgs[0].Body))
	gone, err := s.store.Get(ctx, "w-1")
	require.NoError(t, err)
	require.True(t, awstest.SettledDone(gone), "%+v", gone)
	later, err := s.store.Get(ctx, "w-later")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, later.Status, "a delayed row is left to the sweep")
	logged(t, logs, `"wake finished"`)
}

func TestWakeBootstrap_NeverFailsABatchOfGarbage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	emu, logs := start(t, "wake", s.env)
	garbage := `{"Records":[{"eventID":"1","eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"N":"1"}}}},{"eventID":"2","eventName":"REMOVE"},{"eventID":"3","eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"missing"},"status":{"S":"pending"},"due_at":{"N":"1"}}}}]}`
	out, err := emu.Invoke(context.Background(), []byte(garbage))
	require.NoError(t, err, logs.String())
	var resp events.DynamoDBEventResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Empty(t, resp.BatchItemFailures)
	logged(t, logs, "wake skipped a stream record")
}
