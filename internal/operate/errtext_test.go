package operate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/operate"
)

// TestCodeFirst_ReordersAnErrorStoredBeforeTheCodeCameFirstAndLeavesOthers:
// a dead letter of an older dispatcher keeps its error as the SDK wrote
// it, cause last; the views lead with the code for it too, losing
// nothing, and leave any other text alone (issue 50, item 5).
func TestCodeFirst_ReordersAnErrorStoredBeforeTheCodeCameFirstAndLeavesOthers(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"an SDK error stored cause last",
			"send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1, AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist.",
			"AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1)"},
		{"a closing message's",
			"its place's closing message: publish batch: operation error SNS: PublishBatch, https response error StatusCode: 404, RequestID: , NotFound: Topic does not exist",
			"NotFound: Topic does not exist (its place's closing message: publish batch: operation error SNS: PublishBatch, https response error StatusCode: 404, RequestID: )"},
		{"code first already",
			"AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1)",
			"AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1)"},
		{"no API error after the response", "send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 500, RequestID: r, ",
			"send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 500, RequestID: r, "},
		{"a per-entry refusal", "sqs refused message: InvalidParameterValue: bad", "sqs refused message: InvalidParameterValue: bad"},
		{"no route", `no route for queue "q"`, `no route for queue "q"`},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, operate.CodeFirst(tt.in))
		})
	}
}
