package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
)

// hungSQS is an SQS endpoint whose every call hangs until its context ends.
type hungSQS struct{}

func (hungSQS) SendMessageBatch(ctx context.Context, _ *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A send through WithCallTimeout ends at its timeout, however long the
// caller's own context lasts.
func TestWithCallTimeout_EndsAHungSend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{"short", 10 * time.Millisecond},
		{"shorter", time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := delivery.Clients{SQS: hungSQS{}}.WithCallTimeout(tt.timeout).SQS.SendMessageBatch(context.Background(), nil)
			require.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}
