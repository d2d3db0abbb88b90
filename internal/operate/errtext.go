package operate

import "regexp"

// sdkOrder is an AWS SDK for Go v2 error as dispatchers before
// outbox.ErrorText stored it: the operation and the HTTP response first,
// the service's code and message last, where a shortened view cut them
// off.
var sdkOrder = regexp.MustCompile(`(?s)^(.*https response error StatusCode: \d+, RequestID: [^,]*), ([A-Za-z][\w.:-]*: .*)$`)

// CodeFirst is a stored error as outbox.ErrorText writes it, the
// service's error code and message first, for one stored before it did:
// "send batch: operation error SQS: SendMessageBatch, https response
// error StatusCode: 400, RequestID: r, AWS.SimpleQueueService.NonExistentQueue:
// The specified queue does not exist." reads "AWS.SimpleQueueService.
// NonExistentQueue: The specified queue does not exist. (send batch: …,
// RequestID: r)". Any other text is returned as it is: nothing is lost,
// only moved.
func CodeFirst(msg string) string {
	m := sdkOrder.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	return m[2] + " (" + m[1] + ")"
}
