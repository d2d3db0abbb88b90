package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// fakeAPIError has smithy-go's APIError methods, as the SDK's service
// errors do (their Error is "code: message").
type fakeAPIError struct{ code, msg string }

func (e *fakeAPIError) Error() string        { return e.code + ": " + e.msg }
func (e *fakeAPIError) ErrorCode() string    { return e.code }
func (e *fakeAPIError) ErrorMessage() string { return e.msg }

// TestErrorText_LeadsWithTheServicesErrorCodeThenTheRestOfTheChain: an
// SDK error reads operation first and cause last, so a view that shortens
// it shows no cause; the stored text leads with the code and message
// (issue 50, item 5), keeps the chain's other wrapping and says the API
// error once. An error with no API error in its chain is kept as it is.
func TestErrorText_LeadsWithTheServicesErrorCodeThenTheRestOfTheChain(t *testing.T) {
	t.Parallel()
	missing := &fakeAPIError{"AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist."}
	sdk := func(api error) error {
		return fmt.Errorf("operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1, %w", api)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a request the service refused", fmt.Errorf("send batch: %w", outbox.Refused(sdk(missing))),
			"AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1)"},
		{"a closing message's", fmt.Errorf("its place's closing message: %w", fmt.Errorf("send batch: %w", sdk(missing))),
			"AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (its place's closing message: send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: r-1)"},
		{"an API error alone", missing, "AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist."},
		{"a code without a message", fmt.Errorf("put events: %w", &fakeAPIError{code: "ThrottlingException"}), "ThrottlingException (put events)"},
		{"no API error", fmt.Errorf("send batch: %w", context.DeadlineExceeded), "send batch: context deadline exceeded"},
		{"an empty code", fmt.Errorf("x: %w", &fakeAPIError{msg: "m"}), "x: : m"},
		{"a plain error", errors.New(`no route for queue "q"`), `no route for queue "q"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, outbox.ErrorText(tt.err))
		})
	}
}
