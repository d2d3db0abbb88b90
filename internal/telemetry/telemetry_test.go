package telemetry_test

import (
	"bytes"
	"encoding/json"
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
	sum := telemetry.NewSummary("sweep", outbox.Result{Claimed: 5, Delivered: 3, DeadLettered: 1, Expired: 1, OldestDueAge: 1500 * time.Millisecond, Duration: 2 * time.Second})
	require.NoError(t, telemetry.WriteEMF(&buf, "Outflow", "outbox", time.UnixMilli(123), sum))
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
		Delivered      int64
		DeadLettered   int64
		OldestDueAgeMs int64
		DurationMs     int64
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	require.Equal(t, int64(123), doc.AWS.Timestamp)
	require.Len(t, doc.AWS.CloudWatchMetrics, 1)
	cw := doc.AWS.CloudWatchMetrics[0]
	require.Equal(t, "Outflow", cw.Namespace)
	require.Equal(t, [][]string{{"Table"}}, cw.Dimensions)
	require.Len(t, cw.Metrics, len(telemetry.MetricNames()))
	require.Equal(t, "outbox", doc.Table)
	require.Equal(t, int64(3), doc.Delivered)
	require.Equal(t, int64(2), doc.DeadLettered, "expired rows are dead letters too")
	require.Equal(t, int64(1500), doc.OldestDueAgeMs)
	require.Equal(t, int64(2000), doc.DurationMs)
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
