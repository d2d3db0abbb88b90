package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// countingSQS counts the SendMessageBatch calls that pass to next.
type countingSQS struct {
	next  delivery.SQSAPI
	calls atomic.Int64
}

func (c *countingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.calls.Add(1)
	return c.next.SendMessageBatch(ctx, in, opts...)
}

// TestDeliver_StartsNoRequestTheFenceRefuses: a Deliver of eleven rows
// makes two requests on every target. When the engine's fence refuses
// once the first request is made (the rows' lease no longer covers a
// call), the second request is never made, and its row gets
// outbox.ErrLeaseEnding: the engine releases it unsent.
func TestDeliver_StartsNoRequestTheFenceRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T) (c delivery.Clients, calls func() int64, address, reader string)
		rows  []outbox.Row
	}{
		{"sqs", func(t *testing.T) (delivery.Clients, func() int64, string, string) {
			q := awstest.NewQueue(t, false)
			api := &countingSQS{next: awstest.SQS(t)}
			return delivery.Clients{SQS: api}, api.calls.Load, q, q
		}, rows(11, 10)},
		{"sns", func(t *testing.T) (delivery.Clients, func() int64, string, string) {
			topic := awstest.NewTopic(t, false)
			api := &countingSNS{next: awstest.SNS(t)}
			return delivery.Clients{SNS: api}, api.calls.Load, topic, awstest.Subscribe(t, topic, false)
		}, rows(11, 10)},
		{"eventbridge", func(t *testing.T) (delivery.Clients, func() int64, string, string) {
			name, bus := awstest.NewBus(t)
			api := &countingEvents{next: awstest.EventBridge(t)}
			return delivery.Clients{EventBridge: api}, api.calls.Load, bus + "?source=outflow.test&detail-type=fenced", awstest.RouteEvents(t, name, "outflow.test")
		}, events(11, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, calls, address, reader := tt.setup(t)
			d := router(t, c, delivery.Routes{"r": address})
			ctx := outbox.WithFence(context.Background(), func(outbox.Row) bool { return calls() == 0 })
			errs := d.Deliver(ctx, "r", tt.rows)
			require.EqualValues(t, 1, calls(), "the second request was never made")
			for i, err := range errs[:10] {
				require.NoError(t, err, "row %d went in the first request", i)
			}
			require.ErrorIs(t, errs[10], outbox.ErrLeaseEnding)
			// Eleven asked for: the fenced row must not arrive.
			require.Len(t, awstest.Receive(t, reader, 11, 3*time.Second), 10)
		})
	}
}

// TestDeliver_CallsAFailureDefiniteOnlyWhenTheTargetAnsweredForTheEntry:
// under skip, a dead head lets its group go at once only when its last
// failure proves the target did not store it: an entry the answer
// refused, a request refused because its queue does not exist, or a row
// never sent. A request that failed as a whole otherwise (timed out, cut
// off, 5xx, throttled) or an answer that left the entry out may have been
// stored.
func TestDeliver_CallsAFailureDefiniteOnlyWhenTheTargetAnsweredForTheEntry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		answer       func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
		wantDefinite bool
	}{
		{"entry refused, transient", func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return &sqs.SendMessageBatchOutput{Failed: []types.BatchResultErrorEntry{{Id: in.Entries[0].Id, Code: aws.String("InternalError"), Message: aws.String("x")}}}, nil
		}, true},
		{"entry refused, sender's fault", func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return &sqs.SendMessageBatchOutput{Failed: []types.BatchResultErrorEntry{{Id: in.Entries[0].Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("x"), SenderFault: true}}}, nil
		}, true},
		{"request timed out", func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return nil, fmt.Errorf("operation error SQS: SendMessageBatch: %w", context.DeadlineExceeded)
		}, false},
		{"request failed on the service's side", func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return nil, errors.New("operation error SQS: SendMessageBatch, https response error StatusCode: 500")
		}, false},
		{"entry left out of the answer", func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return &sqs.SendMessageBatchOutput{}, nil
		}, false},
		{"request refused: the queue does not exist", func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return nil, fmt.Errorf("operation error SQS: SendMessageBatch: %w", &types.QueueDoesNotExist{Message: aws.String("The specified queue does not exist."),
				ErrorCodeOverride: aws.String("AWS.SimpleQueueService.NonExistentQueue")})
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := router(t, delivery.Clients{SQS: &recorder{answer: tt.answer}}, routes)
			errs := d.Deliver(context.Background(), "q", rows(1, 10))
			require.Error(t, errs[0])
			require.Equal(t, tt.wantDefinite, outbox.Definite(errs[0]), "%v", errs[0])
		})
	}
	t.Run("row never sent", func(t *testing.T) {
		t.Parallel()
		d := router(t, delivery.Clients{SQS: &recorder{}}, routes)
		errs := d.Deliver(context.Background(), "nowhere", rows(1, 10))
		require.True(t, outbox.Definite(errs[0]), "%v", errs[0])
	})
}
