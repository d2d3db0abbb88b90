package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/target"
)

// Received is what consumers took off their queues. An arrival is one
// message SQS accepted, told apart by its MessageId: SQS delivers a message
// again when its delete fails or its visibility timeout lapses, and that
// second receive is not a second send.
type Received struct {
	// Arrivals counts the distinct messages received per Outflow key,
	// rows only.
	Arrivals map[string]int
	// Closed counts, per Outflow key, the distinct messages received that
	// closed the key's place (outflow.closed) instead of carrying it.
	Closed map[string]int
	// First holds the keys in the order of their first arrival on each
	// queue, the queues one after another: a FIFO group's order.
	First []string
	// Redelivered counts the receives of a message already received.
	Redelivered int
	// DeleteFailed counts the entries DeleteMessageBatch refused; SQS
	// delivers each again.
	DeleteFailed int
}

func newReceived() Received { return Received{Arrivals: map[string]int{}, Closed: map[string]int{}} }

func (r *Received) add(o Received) {
	for k, n := range o.Arrivals {
		r.Arrivals[k] += n
	}
	for k, n := range o.Closed {
		r.Closed[k] += n
	}
	r.First = append(r.First, o.First...)
	r.Redelivered += o.Redelivered
	r.DeleteFailed += o.DeleteFailed
}

// Consume receives and deletes the messages on a queue, as a consumer
// would, and counts them by Outflow key, until stop is closed and the queue
// then reads empty three times running. Consuming while a run goes keeps
// moto's queues short: moto walks every message of a queue on each send,
// so a queue left to fill makes sending quadratic in messages. It deletes
// because a FIFO queue holds back a group's next message while one is in
// flight.
func Consume(ctx context.Context, client *sqs.Client, url string, stop <-chan struct{}) (Received, error) {
	got := newReceived()
	seen := map[string]bool{} // MessageIds received
	for empty := 0; empty < 3; {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, MessageAttributeNames: []string{delivery.AttrKey, target.AttrClosed},
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
			if id := aws.ToString(m.MessageId); seen[id] {
				got.Redelivered++
			} else {
				seen[id] = true
				key := MessageKey(m)
				if _, closing := m.MessageAttributes[target.AttrClosed]; closing {
					got.Closed[key]++
				} else if got.Arrivals[key]++; got.Arrivals[key] == 1 {
					got.First = append(got.First, key)
				}
			}
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		res, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
		if err != nil {
			return got, fmt.Errorf("delete from %s: %w", url, err)
		}
		got.DeleteFailed += len(res.Failed)
	}
	return got, nil
}

// MessageKey is the Outflow key a received message carries: its
// outflow.key attribute, as a queue route sends it and an SNS topic passes
// it on to a queue subscribed with raw delivery; or, for a message a rule
// sent from an EventBridge bus, whose body is the event, the detail's
// outflow.key. A message with neither gives "".
func MessageKey(m sqstypes.Message) string {
	if a, ok := m.MessageAttributes[delivery.AttrKey]; ok {
		return aws.ToString(a.StringValue)
	}
	var ev struct {
		Detail struct {
			Outflow struct {
				Key string `json:"key"`
			} `json:"outflow"`
		} `json:"detail"`
	}
	if json.Unmarshal([]byte(aws.ToString(m.Body)), &ev) != nil {
		return ""
	}
	return ev.Detail.Outflow.Key
}

// ConsumeAll runs Consume on every queue in urls, concurrently. Call the
// returned function once the run is over: it stops the consumers, waits for
// them to empty their queues, and returns what they received, summed over
// the queues, and any consumer's error.
func ConsumeAll(ctx context.Context, client *sqs.Client, urls []string) (finish func() (Received, error)) {
	stop := make(chan struct{})
	type result struct {
		got Received
		err error
	}
	results := make(chan result, len(urls))
	for _, url := range urls {
		go func() {
			got, err := Consume(ctx, client, url, stop)
			results <- result{got, err}
		}()
	}
	return func() (Received, error) {
		close(stop)
		total := newReceived()
		var errs []error
		for range urls {
			r := <-results
			errs = append(errs, r.err)
			total.add(r.got)
		}
		return total, errors.Join(errs...)
	}
}
