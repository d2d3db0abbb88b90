package telemetry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/telemetry"
)

func TestWriteEMF_IsOneValidEmbeddedMetricRecord(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	sum := telemetry.NewSummary("sweep", outbox.Result{Claimed: 5, Delivered: 3, DeadLettered: 1, Expired: 1, OldestDueAge: 1500 * time.Millisecond, Duration: 2 * time.Second,
		Waiting: 4, BlockedGroups: 2, OldestBlockedAge: 90 * time.Second, Throttled: 7, ClaimConcurrency: 4, Unclaimed: 6})
	require.NoError(t, telemetry.WriteEMF(&buf, "Outflow", "outbox", "WARN", time.UnixMilli(123), sum))
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte("\n")))

	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Table          string
		Level          string `json:"level"`
		Timestamp      string `json:"timestamp"`
		Delivered      int64
		DeadLettered   int64
		OldestDueAgeMs int64
		DurationMs     int64
		Waiting        int64
		BlockedGroups  int64
		Throttled      int64
		Unclaimed      int64
		// OldestBlockedAgeMs is a pointer so a missing field fails.
		OldestBlockedAgeMs *int64
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	require.Equal(t, int64(123), doc.AWS.Timestamp)
	require.Len(t, doc.AWS.CloudWatchMetrics, 1)
	cw := doc.AWS.CloudWatchMetrics[0]
	require.Equal(t, "Outflow", cw.Namespace)
	require.Equal(t, [][]string{{"Table"}}, cw.Dimensions)
	require.Equal(t, [][]string{telemetry.Dimensions()}, cw.Dimensions)
	require.Equal(t, "WARN", doc.Level, "the level Lambda's log filter reads")
	at, err := time.Parse(time.RFC3339Nano, doc.Timestamp)
	require.NoError(t, err, "Lambda reads an RFC 3339 timestamp")
	require.True(t, at.Equal(time.UnixMilli(123)))
	require.Len(t, cw.Metrics, len(telemetry.MetricNames()))
	require.Equal(t, "outbox", doc.Table)
	require.Equal(t, int64(3), doc.Delivered)
	require.Equal(t, int64(2), doc.DeadLettered, "expired rows are dead letters too")
	require.Equal(t, int64(1500), doc.OldestDueAgeMs)
	require.Equal(t, int64(2000), doc.DurationMs)
	require.Equal(t, int64(4), doc.Waiting)
	require.Equal(t, int64(2), doc.BlockedGroups)
	require.Equal(t, int64(7), doc.Throttled)
	require.Equal(t, int64(6), doc.Unclaimed)
	require.Equal(t, 4, sum.ClaimConcurrency, "the log line's least claims in flight")
	require.NotNil(t, doc.OldestBlockedAgeMs)
	require.Equal(t, int64(90000), *doc.OldestBlockedAgeMs)
	units := map[string]string{}
	for _, m := range cw.Metrics {
		units[m.Name] = m.Unit
	}
	for name, unit := range map[string]string{"Waiting": "Count", "BlockedGroups": "Count", "OldestBlockedAgeMs": "Milliseconds", "Throttled": "Count", "Unclaimed": "Count"} {
		require.Equal(t, unit, units[name], "%s is declared as a metric", name)
	}
}

// TestWriteEMF_ReportsNoBlockedGroupAsZero: every record carries the
// ordered-group metrics, 0 when none is blocked, so the blocked-group alarm
// sees the group released.
func TestWriteEMF_ReportsNoBlockedGroupAsZero(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, telemetry.WriteEMF(&buf, "Outflow", "outbox", "INFO", time.UnixMilli(1), telemetry.NewSummary("wake", outbox.Result{Delivered: 1})))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	for _, name := range []string{"Waiting", "BlockedGroups", "OldestBlockedAgeMs"} {
		require.Contains(t, doc, name)
		require.Equal(t, 0.0, doc[name], name)
	}
}

func TestLevel_FollowsLambdaLogLevel(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]slog.Level{
		"TRACE": slog.LevelDebug, "DEBUG": slog.LevelDebug, "INFO": slog.LevelInfo, "": slog.LevelInfo,
		"WARN": slog.LevelWarn, "error": slog.LevelError, "FATAL": slog.LevelError,
	} {
		require.Equal(t, want, telemetry.Level(name), name)
	}
	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, func(string) string { return "WARN" })
	log.Info("hidden")
	log.Warn("shown")
	require.NotContains(t, buf.String(), "hidden")
	require.Contains(t, buf.String(), `"msg":"shown"`)
}

func TestNewLogger_LinesCarryTheKeysLambdasLogFilterReads(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	telemetry.NewLogger(&buf, func(string) string { return "" }).Warn("careful", "n", 1)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "WARN", line["level"])
	require.NotContains(t, line, "time", "Lambda documents timestamp, not time")
	ts, ok := line["timestamp"].(string)
	require.True(t, ok, buf.String())
	_, err := time.Parse(time.RFC3339Nano, ts)
	require.NoError(t, err)
}

func TestRecordLevel_IsTheFunctionsLevelButNeverBelowInfo(t *testing.T) {
	t.Parallel()
	for level, want := range map[string]string{"": "INFO", "TRACE": "INFO", "DEBUG": "INFO", "INFO": "INFO", "WARN": "WARN", "ERROR": "ERROR", "FATAL": "ERROR"} {
		require.Equal(t, want, telemetry.RecordLevel(func(string) string { return level }), level)
	}
}

func TestNewLogger_KeepsAnAttributeNamedTimeAsGiven(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		value any
		want  any
	}{
		{"a string", "5m", "5m"},
		{"a number", 3, 3.0},
		{"a duration", 2 * time.Second, float64(2 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			log := telemetry.NewLogger(&buf, func(string) string { return "" })
			require.NotPanics(t, func() { log.Info("lease", "time", tc.value) })
			var line map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
			require.Equal(t, tc.want, line["time"])
			_, err := time.Parse(time.RFC3339Nano, fmt.Sprint(line["timestamp"]))
			require.NoError(t, err, "the record's own time is still the timestamp")
		})
	}
}
