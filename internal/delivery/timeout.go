package delivery

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The functions and `outflow sweep` give every AWS call a timeout
// (outbox.Policy.CallTimeout) so that a claim, its send and its settle end
// inside the claim's lease even when a call hangs; the invocation's
// deadline alone ends later than the lease allows for a claim taken late
// in it.

// WithCallTimeout returns api with each call bounded by d.
func WithCallTimeout(api API, d time.Duration) API { return sqsTimeout{api, d} }

// sqsTimeout bounds each SQS call the deliverer makes.
type sqsTimeout struct {
	api API
	d   time.Duration
}

func (t sqsTimeout) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.SendMessageBatch(ctx, in, opts...)
}
