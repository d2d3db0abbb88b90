package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/delivery"
)

// Consume receives and deletes the messages on a queue, as a consumer
// would, and counts them by Outflow key, until stop is closed and the queue
// then reads empty three times running. Consuming while a run goes keeps
// moto's queues short: moto walks every message of a queue on each send,
// so a queue left to fill makes sending quadratic in messages. It deletes
// because a FIFO queue holds back a group's next message while one is in
// flight.
func Consume(ctx context.Context, client *sqs.Client, url string, stop <-chan struct{}) (map[string]int, error) {
	got := map[string]int{}
	for empty := 0; empty < 3; {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, MessageAttributeNames: []string{delivery.AttrKey},
		})
		if err != nil {
			return got, fmt.Errorf("receive from %s: %w", url, err)
		}
		if len(out.Messages) == 0 {
			select {
			case <-stop:
				empty++
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return got, ctx.Err()
			}
			continue
		}
		empty = 0
		del := make([]sqstypes.DeleteMessageBatchRequestEntry, 0, len(out.Messages))
		for i, m := range out.Messages {
			got[aws.ToString(m.MessageAttributes[delivery.AttrKey].StringValue)]++
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
			return got, fmt.Errorf("delete from %s: %w", url, err)
		}
	}
	return got, nil
}

// ConsumeAll runs Consume on every queue in urls, concurrently. Call the
// returned function once the run is over: it stops the consumers, waits for
// them to empty their queues, and returns the counts by key summed over the
// queues and any consumer's error.
func ConsumeAll(ctx context.Context, client *sqs.Client, urls []string) (finish func() (map[string]int, error)) {
	stop := make(chan struct{})
	type result struct {
		got map[string]int
		err error
	}
	results := make(chan result, len(urls))
	for _, url := range urls {
		go func() {
			got, err := Consume(ctx, client, url, stop)
			results <- result{got, err}
		}()
	}
	return func() (map[string]int, error) {
		close(stop)
		total := map[string]int{}
		var errs []error
		for range urls {
			r := <-results
			errs = append(errs, r.err)
			for k, n := range r.got {
				total[k] += n
			}
		}
		return total, errors.Join(errs...)
	}
}
