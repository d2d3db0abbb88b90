package outbox

import (
	"errors"
	"strings"
)

// apiError is smithy-go's APIError as the engine sees it, without
// importing the SDK: the service's error code and message, which every
// AWS SDK for Go v2 error a service answered with carries in its chain
// (operation error, then https response error, then the API error).
type apiError interface {
	error
	ErrorCode() string
	ErrorMessage() string
}

// ErrorText is the text stored for a failed attempt's err: the service's
// error code and message first, when err wraps an API error, then the
// rest of the chain in parentheses without the API error's own text
// again:
//
//	AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist. (send batch: operation error SQS: SendMessageBatch, https response error StatusCode: 400, RequestID: …)
//
// SDK errors read the other way round, so a view that shortens the text
// kept the operation and cut off the cause. Any other error is its
// Error(). The text holds nothing of the row: an API error's message is
// the service's, and the wrapping is the deliverer's.
func ErrorText(err error) string {
	text := err.Error()
	var api apiError
	if !errors.As(err, &api) || api.ErrorCode() == "" {
		return text
	}
	lead := api.ErrorCode()
	if msg := api.ErrorMessage(); msg != "" {
		lead += ": " + msg
	}
	rest := text
	if own := api.Error(); own != "" {
		if i := strings.LastIndex(text, own); i >= 0 {
			rest = strings.TrimRight(strings.TrimSpace(text[:i]), ",:") + text[i+len(own):]
		}
	}
	if rest = strings.TrimSpace(rest); rest == "" || rest == lead {
		return lead
	}
	return lead + " (" + rest + ")"
}
