package handler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/stack"
)

// lambdaLevels are Lambda's application log levels, least severe first.
var lambdaLevels = []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}

func levelRank(name string) int {
	for i, l := range lambdaLevels {
		if strings.EqualFold(l, name) {
			return i
		}
	}
	return -1
}

// lambdaKeeps reports whether Lambda's application log filter, set to
// filter, sends line to CloudWatch Logs. It is the rule the Lambda
// developer guide documents for runtimes other than the managed ones
// ("Log-level filtering"): the line must be a JSON object with a "level"
// key; an invalid or missing level counts as INFO; so does a line without
// a valid RFC 3339 "timestamp". A line is kept when its level is at or
// above the filter's. The guide says Lambda also accepts "most common"
// timestamp key names without listing them, so this filter is strict: only
// the documented "timestamp" counts (slog's default "time" does not).
func lambdaKeeps(line, filter string) bool {
	level := "INFO"
	var doc map[string]any
	if json.Unmarshal([]byte(line), &doc) == nil {
		ts, _ := doc["timestamp"].(string)
		_, tsErr := time.Parse(time.RFC3339Nano, ts)
		if l, ok := doc["level"].(string); ok && levelRank(l) >= 0 && tsErr == nil {
			level = l
		}
	}
	return levelRank(level) >= levelRank(filter)
}

// kept returns the lines of out that Lambda would keep at filter.
func kept(t *testing.T, out string, filter string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !lambdaKeeps(sc.Text(), filter) {
			continue
		}
		var doc map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &doc), "a kept line is JSON: %s", sc.Text())
		lines = append(lines, doc)
	}
	require.NoError(t, sc.Err())
	return lines
}

func TestLambdaKeeps_FollowsTheDocumentedRule(t *testing.T) {
	t.Parallel()
	const ts = `"timestamp":"2026-12-02T16:00:00.123Z"`
	tests := []struct {
		line, filter string
		want         bool
	}{
		{`{"level":"debug","msg":"x",` + ts + `}`, "DEBUG", true},
		{`{"level":"debug","msg":"x",` + ts + `}`, "INFO", false},
		{`{"level":"WARN","msg":"x",` + ts + `}`, "WARN", true},
		{`{"level":"ERROR","msg":"x",` + ts + `}`, "ERROR", true},
		{`{"level":"INFO","msg":"x",` + ts + `}`, "WARN", false},
		{`{"msg":"no level",` + ts + `}`, "INFO", true},
		{`{"msg":"no level",` + ts + `}`, "WARN", false},
		{`{"level":"loud","msg":"invalid level",` + ts + `}`, "WARN", false},
		{`{"level":"ERROR","msg":"no timestamp"}`, "WARN", false},
		{`{"level":"ERROR","msg":"time, not timestamp","time":"2026-12-02T16:00:00Z"}`, "ERROR", false},
		{`{"level":"ERROR","msg":"bad timestamp","timestamp":"yesterday"}`, "ERROR", false},
		{`plain text`, "INFO", true},
		{`plain text`, "WARN", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, lambdaKeeps(tt.line, tt.filter), "%s at %s", tt.line, tt.filter)
	}
}

// syncBuffer is output goroutines write while the test reads it.
type syncBuffer = awstest.SyncBuffer

func TestHandlers_MetricsAndInitErrorsSurviveEveryAllowedLogLevel(t *testing.T) {
	t.Parallel()
	// Parameters only: the examples keep the template loadable without Routes.
	tpl, err := stack.Load("../../template.yaml", map[string]string{"ExampleTargets": "true"})
	require.NoError(t, err)
	levels := tpl.Parameters["LogLevel"].AllowedValues
	require.NotEmpty(t, levels)
	for _, lv := range levels {
		level := fmt.Sprint(lv)
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
			env := map[string]string{
				"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue,
				"OUTFLOW_WAKE_GRACE": "0s", "AWS_LAMBDA_LOG_LEVEL": level,
			}
			getenv := func(k string) string { return env[k] }

			// Phase 1: a sweep and a wake each deliver a row.
			out := &syncBuffer{}
			rt, err := handler.Setup(awstest.TestConfig(t), getenv, out)
			require.NoError(t, err)
			store, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
			require.NoError(t, err)
			now := time.Now()
			require.NoError(t, store.Stage(ctx, outbox.Row{Key: "swept", Queue: "orders", Payload: []byte("x")}, now))
			sum, err := handler.NewSweep(rt).Handle(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, 1, sum.Delivered)
			require.NoError(t, store.Stage(ctx, outbox.Row{Key: "woken", Queue: "orders", Payload: []byte("y")}, now))
			var ev events.DynamoDBEvent
			require.NoError(t, json.Unmarshal(fmt.Appendf(nil,
				`{"Records":[{"eventID":"1","eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"woken"},"status":{"S":"pending"},"due_at":{"N":"%d"}}}}]}`,
				now.UnixMilli()), &ev))
			_, err = handler.NewWake(rt).Handle(ctx, ev)
			require.NoError(t, err)

			// Phase 2: what Lambda keeps at this level still has both
			// metric records, and drops what is below the level.
			delivered := map[string]float64{}
			finished := 0
			for _, line := range kept(t, out.String(), level) {
				if _, ok := line["_aws"]; ok {
					delivered[fmt.Sprint(line["Function"])] += line["Delivered"].(float64)
				}
				if strings.HasSuffix(fmt.Sprint(line["msg"]), " finished") {
					finished++
				}
			}
			require.Equal(t, map[string]float64{"sweep": 1, "wake": 1}, delivered, "both EMF records are kept at %s", level)
			if levelRank(level) > levelRank("INFO") {
				require.Zero(t, finished, "the INFO summaries are filtered out at %s", level)
			} else {
				require.Equal(t, 2, finished)
			}

			// Phase 3: an init error is kept, naming the variable.
			out = &syncBuffer{}
			env["OUTFLOW_MAX_ATTEMPTS"] = "zero"
			_, err = handler.Setup(awstest.TestConfig(t), getenv, out)
			require.Error(t, err)
			var reasons []string
			for _, line := range kept(t, out.String(), level) {
				reasons = append(reasons, fmt.Sprint(line["error"]))
			}
			require.Len(t, reasons, 1, out.String())
			require.Contains(t, reasons[0], `OUTFLOW_MAX_ATTEMPTS="zero": not an integer`)
		})
	}
}
