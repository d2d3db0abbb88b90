package delivery

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The functions and `outflow sweep` give every AWS call a timeout
// (outbox.Policy.CallTimeout) so that a claim, its send and its settle end
// inside the claim's lease even when a call hangs; the invocation's
// deadline alone ends later than the lease allows for a claim taken late
// in it.

// WithCallTimeout returns the clients with each call bounded by d.
func (c Clients) WithCallTimeout(d time.Duration) Clients {
	out := Clients{}
	if c.SQS != nil {
		out.SQS = sqsTimeout{c.SQS, d}
	}
	if c.SNS != nil {
		out.SNS = snsTimeout{c.SNS, d}
	}
	if c.EventBridge != nil {
		out.EventBridge = eventsTimeout{c.EventBridge, d}
	}
	return out
}

// sqsTimeout, snsTimeout and eventsTimeout bound each call the deliverer
// makes.
type (
	sqsTimeout struct {
		api SQSAPI
		d   time.Duration
	}
	snsTimeout struct {
		api SNSAPI
		d   time.Duration
	}
	eventsTimeout struct {
		api EventBridgeAPI
		d   time.Duration
	}
)

func (t sqsTimeout) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.SendMessageBatch(ctx, in, opts...)
}

func (t snsTimeout) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.PublishBatch(ctx, in, opts...)
}

func (t eventsTimeout) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.PutEvents(ctx, in, opts...)
}
