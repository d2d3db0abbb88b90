package consume_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// receivingSQS marks when a long poll is in flight, and counts the polls
// answered with their messages given back (the release that follows).
type receivingSQS struct {
	*sqs.Client
	receiving atomic.Bool
	answered  atomic.Int32
}

func (r *receivingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	r.receiving.Store(true)
	out, err := r.Client.ReceiveMessage(ctx, in, opts...)
	if err != nil || len(out.Messages) == 0 {
		r.answered.Add(1)
	}
	return out, err
}

func (r *receivingSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out, err := r.Client.ChangeMessageVisibilityBatch(ctx, in, opts...)
	r.answered.Add(1)
	return out, err
}

// Review of issue 51, adopted: SQS (moto likewise) goes on serving a long
// poll whose request was dropped until its wait ends, so a message sent
// after Run stopped was received for a consumer that was gone and stayed
// invisible for the whole visibility timeout. Run now leaves the poll to
// answer, and gives back what it receives, as Python's Poller does.
func TestAdv51_PollerGivesBackWhatALongPollAbandonedAtShutdownReceives(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, false)
	api := &receivingSQS{Client: awstest.SQS(t)}
	var applied atomic.Int32
	p := &consume.Poller{API: api, QueueURL: url, Wait: 5 * time.Second, Visibility: 60 * time.Second, Closed: consume.AckClosed,
		Apply: func(context.Context, consume.Message) error { applied.Add(1); return nil }}
	stop := runPoller(t, p)
	for deadline := time.Now().Add(time.Minute); !api.receiving.Load(); {
		require.True(t, time.Now().Before(deadline), "no long poll")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the poll is with the server
	require.NoError(t, stop())

	// A message for the poll still in flight at the server.
	deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "q", url, outbox.Row{Key: "late-comer", Attempt: 1, Payload: []byte("p")})

	// Once the abandoned poll has answered (its 5 s wait, well inside
	// the 60 s visibility timeout) and given back what it took, if
	// anything, the message is visible.
	for deadline := time.Now().Add(time.Minute); api.answered.Load() == 0; {
		require.True(t, time.Now().Before(deadline), "the abandoned poll never answered")
		time.Sleep(100 * time.Millisecond)
	}
	// A poll the client dropped answers nobody: the server holds it to its
	// wait's end, and takes the message meanwhile.
	time.Sleep(p.Wait + 3*time.Second)
	out, err := awstest.SQS(t).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	visible := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]
	inFlight := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
	require.Zero(t, applied.Load(), "nothing was applied after shutdown")
	require.Equal(t, []string{"1", "0"}, []string{visible, inFlight}, "visible, in flight")
}
