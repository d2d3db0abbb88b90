package stack_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/telemetry"
)

// Lambda's own metrics (AWS/Lambda) Outflow watches, by the dimension they
// are published under.
var (
	lambdaFunctionMetrics = []string{"Invocations", "Errors", "Throttles", "Duration", "IteratorAge"}
	// Published for the mapping only with MetricsConfig EventCount.
	mappingEventCountMetrics = []string{"PolledEventCount", "InvokedEventCount", "FilteredOutEventCount", "FailedInvokeEventCount", "DroppedEventCount"}
	// SQS's queue metrics (AWS/SQS), published for every queue under its
	// QueueName.
	sqsQueueMetrics = []string{"ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesNotVisible", "ApproximateAgeOfOldestMessage", "NumberOfMessagesSent", "NumberOfMessagesReceived", "NumberOfMessagesDeleted"}
)

// requireEmitted fails unless the metric is one something in this stack
// publishes, under exactly these dimensions: Outflow's EMF record (the
// namespace the functions are given, the dimensions telemetry emits), a
// function's Lambda metrics, the wake mapping's event counts, or a queue's
// SQS metrics.
func requireEmitted(t *testing.T, what, namespace, metric string, dims map[string]string) {
	t.Helper()
	ours := function(t, load(t, nil), "SweepFunction").Environment.Variables["OUTFLOW_METRICS_NAMESPACE"]
	require.NotEmpty(t, ours)
	switch namespace {
	case ours:
		require.Contains(t, telemetry.MetricNames(), metric, "%s: Outflow does not emit %s", what, metric)
		require.ElementsMatch(t, telemetry.Dimensions(), slices.Collect(maps.Keys(dims)), "%s: %s dimensions", what, metric)
		require.Equal(t, "${OutboxTable}", dims["Table"], what)
	case "AWS/Lambda":
		switch {
		case slices.Contains(lambdaFunctionMetrics, metric):
			require.Len(t, dims, 1, what)
			require.Contains(t, []string{"${SweepFunction}", "${WakeFunction}"}, dims["FunctionName"], "%s: %s of a function of this stack", what, metric)
			if metric == "IteratorAge" {
				require.Equal(t, "${WakeFunction}", dims["FunctionName"], "%s: only the stream function has an iterator age", what)
			}
		case slices.Contains(mappingEventCountMetrics, metric):
			require.Equal(t, map[string]string{"EventSourceMappingUUID": "${WakeFunctionStream}"}, dims, what)
			var esm struct{ MetricsConfig struct{ Metrics []string } }
			resourceOf(t, translated(t, nil), "WakeFunctionStream", "AWS::Lambda::EventSourceMapping", &esm)
			require.Contains(t, esm.MetricsConfig.Metrics, "EventCount", "%s: the mapping publishes %s only with MetricsConfig EventCount", what, metric)
		default:
			require.Failf(t, "unexpected Lambda metric", "%s: %s", what, metric)
		}
	case "AWS/SQS":
		require.Contains(t, sqsQueueMetrics, metric, "%s: SQS does not publish %s", what, metric)
		require.Len(t, dims, 1, what)
		name, isQueueName := strings.CutSuffix(dims["QueueName"], ".QueueName}")
		require.True(t, isQueueName, "%s: %s of a queue of this stack, by its QueueName, got %v", what, metric, dims)
		// The raw translation holds every resource, whatever its condition.
		var doc struct {
			Resources map[string]struct{ Type string }
		}
		require.NoError(t, json.Unmarshal(translatedRaw(t), &doc))
		require.Equal(t, "AWS::SQS::Queue", doc.Resources[strings.TrimPrefix(name, "${")].Type, "%s: %s", what, dims["QueueName"])
	default:
		require.Failf(t, "unexpected namespace", "%s: %s (the functions emit %s)", what, namespace, ours)
	}
}
