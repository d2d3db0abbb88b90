package moto_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// TestFIFO_ConcurrentReceivesNeverSplitAGroup has several consumers
// long-poll one FIFO group at once, each taking one message, holding it
// a moment and deleting it: SQS hands out a group's next message only
// once the one in flight is deleted, so no two are ever in flight and
// they come in order. (moto 5.2.5's threaded server let two receives
// each take one message of the group: a consumer then applied a later
// place first, which is what blocked the e2e soak's group hot-1 with
// seed 518467861.)
func TestFIFO_ConcurrentReceivesNeverSplitAGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, url := awstest.SQS(t), awstest.NewQueue(t, true)
	const messages, consumers = 60, 6
	for i := 0; i < messages; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < i+10; j++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprint(j)),
				MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String(fmt.Sprint(j))})
		}
		out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}

	var mu sync.Mutex
	inFlight, got := 0, []string{}
	var split []string
	errs := make([]error, consumers)
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(got) == messages
				mu.Unlock()
				if done {
					return
				}
				out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1, VisibilityTimeout: 30, WaitTimeSeconds: 1})
				if err != nil {
					errs[c] = err
					return
				}
				for _, m := range out.Messages {
					mu.Lock()
					inFlight++
					if inFlight > 1 {
						split = append(split, aws.ToString(m.Body))
					}
					got = append(got, aws.ToString(m.Body))
					mu.Unlock()
					time.Sleep(time.Millisecond) // the consumer's effect
					mu.Lock()
					inFlight-- // before the delete: the next receive can follow it only
					mu.Unlock()
					if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
						errs[c] = err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Empty(t, split, "a message received while another of its group was in flight")
	want := make([]string, messages)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	require.Equal(t, want, got, "the group in order, each message once")
}
