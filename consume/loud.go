package consume

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// MetricNoClosedHook is the metric a Handler or a Poller counts, in
// CloudWatch embedded metric format, for each message that closes a place
// and meets no Closed hook: alarm on it (namespace MetricNamespace,
// dimension Queue). Lambda turns the line into the metric as it is; a
// container needs the CloudWatch agent or a log router that reads EMF.
const MetricNoClosedHook = "ClosingMessagesWithoutHook"

// MetricNamespace is the CloudWatch namespace of the consume package's
// metrics.
const MetricNamespace = "Outflow/Consumer"

// loud makes a wiring mistake impossible to miss: err, if it wraps
// ErrNoClosedHook, is logged at ERROR with the queue and the fix, and
// counted as one MetricNoClosedHook in an EMF line on metrics. Other
// errors go only to the caller's OnFailure, as before.
func loud(ctx context.Context, log *slog.Logger, metrics io.Writer, queue, messageID string, err error) {
	if !errors.Is(err, ErrNoClosedHook) {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	log.ErrorContext(ctx, "consume: closing message not acknowledged: no Closed hook", "queue", queue, "message_id", messageID, "error", err)
	if metrics == nil {
		metrics = os.Stdout
	}
	doc := map[string]any{
		"_aws": map[string]any{
			"Timestamp": time.Now().UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  MetricNamespace,
				"Dimensions": [][]string{{"Queue"}},
				"Metrics":    []any{map[string]string{"Name": MetricNoClosedHook, "Unit": "Count"}},
			}},
		},
		"Queue":            queue,
		MetricNoClosedHook: 1,
		"message_id":       messageID,
		"cause":            ErrNoClosedHook.Error(),
	}
	line, _ := json.Marshal(doc) // a map of strings, numbers and slices: always encodes
	_, _ = metrics.Write(append(line, '\n'))
}

// queueName is the last part of a queue's ARN or URL: the dimension a
// metric names it by.
func queueName(arnOrURL string) string {
	if i := strings.LastIndexAny(arnOrURL, ":/"); i >= 0 {
		return arnOrURL[i+1:]
	}
	return arnOrURL
}

// countOutcomes writes one EMF line counting a batch's outcomes, one
// metric per Outcome (Applied, Closed, ...), every one present, so a
// dashboard reads zeros as zeros rather than as missing data.
func countOutcomes(metrics io.Writer, queue string, c Counts) {
	if metrics == nil {
		metrics = os.Stdout
	}
	names := make([]any, 0, len(Outcomes))
	doc := map[string]any{"Queue": queue}
	for _, o := range Outcomes {
		name := MetricName(o)
		names = append(names, map[string]string{"Name": name, "Unit": "Count"})
		doc[name] = c.Of(o)
	}
	doc["_aws"] = map[string]any{
		"Timestamp": time.Now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  MetricNamespace,
			"Dimensions": [][]string{{"Queue"}},
			"Metrics":    names,
		}},
	}
	line, _ := json.Marshal(doc) // maps of strings, numbers and slices: always encodes
	_, _ = metrics.Write(append(line, '\n'))
}

// MetricName is the metric a Handler's EMF line counts an outcome by:
// its name with a capital (OutcomeApplied is Applied).
func MetricName(o Outcome) string {
	if o == "" {
		return ""
	}
	return strings.ToUpper(string(o[:1])) + string(o[1:])
}
