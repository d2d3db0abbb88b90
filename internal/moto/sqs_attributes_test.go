package moto_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
)

// TestSQS_QueueAttributesStillCountMessagesAndFIFORulesStillHold checks
// what the server's faster SQS must keep: moto read every attribute of a
// queue, counts included, to get one static attribute per message sent
// or received, which the server now skips (server.py, _queue_attributes).
// GetQueueAttributes must still count the messages visible, in flight
// and delayed; a FIFO queue must still refuse a message with no
// deduplication id and drop a repeated one.
func TestSQS_QueueAttributesStillCountMessagesAndFIFORulesStillHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := awstest.SQS(t)

	t.Run("counts", func(t *testing.T) {
		t.Parallel()
		url := awstest.NewQueue(t, false)
		for i := range 3 {
			_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(strconv.Itoa(i))})
			require.NoError(t, err)
		}
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("later"), DelaySeconds: 600})
		require.NoError(t, err)
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1, VisibilityTimeout: 600})
		require.NoError(t, err)
		require.Len(t, got.Messages, 1)

		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		require.NoError(t, err)
		require.Equal(t, "2", out.Attributes["ApproximateNumberOfMessages"], "visible")
		require.Equal(t, "1", out.Attributes["ApproximateNumberOfMessagesNotVisible"], "in flight")
		require.Equal(t, "1", out.Attributes["ApproximateNumberOfMessagesDelayed"], "delayed")
		require.NotEmpty(t, out.Attributes["MessageRetentionPeriod"])
	})

	t.Run("counted while messages are sent", func(t *testing.T) {
		// A FIFO send reads the queue's attributes uncounted, shadowing the
		// names GetQueueAttributes checks a request against: unlocked, a
		// count asked for meanwhile was refused as an unknown attribute.
		t.Parallel()
		url := awstest.NewQueue(t, true)
		done := make(chan error, 1)
		stop := make(chan struct{})
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("m"),
					MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(strconv.Itoa(i))}); err != nil {
					done <- err
					return
				}
			}
		}()
		var failed error
		for range 300 {
			_, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
				AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
			if err != nil {
				failed = err
				break
			}
		}
		close(stop)
		require.NoError(t, <-done)
		require.NoError(t, failed)
	})

	t.Run("FIFO deduplication", func(t *testing.T) {
		t.Parallel()
		url := awstest.NewQueue(t, true)
		send := func(dedup string) error {
			in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("m"), MessageGroupId: aws.String("g")}
			if dedup != "" {
				in.MessageDeduplicationId = aws.String(dedup)
			}
			_, err := client.SendMessage(ctx, in)
			return err
		}
		require.Error(t, send(""), "no deduplication id on a queue without content-based deduplication")
		require.NoError(t, send("a"))
		require.NoError(t, send("a"), "SQS accepts a repeat and drops it")
		require.NoError(t, send("b"))
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		require.NoError(t, err)
		require.Equal(t, "2", out.Attributes["ApproximateNumberOfMessages"], "the repeat of a was dropped")
	})
}
