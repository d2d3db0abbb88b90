package moto_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
)

// TestFIFO_RedeliversAGroupInOrderWhenItsMessagesLapseTogether receives
// a FIFO group's messages in one batch, deletes none, and lets their
// visibility lapse together: SQS then delivers the group again from its
// first message. (moto 5.2.5 handed out the second first: it saw the
// first lapsed message's group as still held by the second, skipped it,
// then delivered the second.)
func TestFIFO_RedeliversAGroupInOrderWhenItsMessagesLapseTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, url := awstest.SQS(t), awstest.NewQueue(t, true)
	for i := range 3 {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprint(i)),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	receive := func(n int32, visibility int32) []string {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: n, VisibilityTimeout: visibility,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		require.NoError(t, err)
		var bodies []string
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
		return bodies
	}

	require.Equal(t, []string{"0", "1", "2"}, receive(10, 1), "the group in one batch, in order")
	time.Sleep(2 * time.Second) // each message's visibility lapses
	require.Equal(t, []string{"0"}, receive(1, 30), "the group again from its first message")
	require.Empty(t, receive(10, 30), "nothing of the group while its first message is in flight again")
}
