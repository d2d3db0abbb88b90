package local

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
	consumer "github.com/outflowhq/outflow/internal/subscriber"
)

// subscriber is a consumer's queue behind a route that is not a queue: an
// SNS subscription with raw message delivery, so the queue gets the body
// and message attributes a queue route would give it, or an EventBridge
// rule on the bus whose target is the queue, which gets each event's JSON.
// These are the consumer's, not the stack's: the demo makes them.
type subscriber struct {
	route  string
	target delivery.Target
	url    string
	// source is what the rule matches: the route's default, which the
	// demo's row leaves in place.
	source string
}

// via says how a subscriber's messages reach its queue.
func (s subscriber) via() string {
	if s.target.Kind == delivery.KindSNS {
		return "subscription (raw) → queue"
	}
	return "rule → queue"
}

// demoSource is the source the demo's EventBridge row carries when its
// route has no default.
const demoSource = "outflow.demo"

// subscribe makes a subscriber queue for every SNS and EventBridge route,
// under names that start with prefix.
func subscribe(ctx context.Context, cfg aws.Config, prefix string, targets map[string]delivery.Target) ([]subscriber, error) {
	q, topics, bus := sqs.NewFromConfig(cfg), sns.NewFromConfig(cfg), eventbridge.NewFromConfig(cfg)
	var subs []subscriber
	for _, route := range slices.Sorted(maps.Keys(targets)) {
		t := targets[route]
		if t.Kind == delivery.KindSQS {
			continue
		}
		name := prefix + "-" + strings.ToLower(strings.NewReplacer(".", "-").Replace(route)) + "-subscriber"
		attrs := map[string]string{}
		if t.FIFO {
			name += ".fifo"
			attrs[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
		}
		out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return nil, fmt.Errorf("subscriber queue for %s: %w", route, err)
		}
		s := subscriber{route: route, target: t, url: aws.ToString(out.QueueUrl), source: t.Source}
		queueARN, err := consumer.QueueARN(ctx, q, s.url)
		if err != nil {
			return nil, fmt.Errorf("subscriber queue for %s: %w", route, err)
		}
		switch t.Kind {
		case delivery.KindSNS:
			err = subscribeTopic(ctx, q, topics, s, queueARN)
		case delivery.KindEventBridge:
			if s.source == "" {
				s.source = demoSource
			}
			err = subscribeBus(ctx, q, bus, s, prefix, queueARN)
		}
		if err != nil {
			return nil, fmt.Errorf("subscriber for %s: %w", route, err)
		}
		subs = append(subs, s)
	}
	return subs, nil
}

// allowSend lets one service principal send to the queue from one source
// ARN only, as a deployed subscriber queue must.
func allowSend(ctx context.Context, q *sqs.Client, url, queueARN, service, sourceARN string) error {
	policy, err := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect": "Allow", "Principal": map[string]string{"Service": service}, "Action": "sqs:SendMessage", "Resource": queueARN,
			"Condition": map[string]any{"ArnEquals": map[string]string{"aws:SourceArn": sourceARN}},
		}},
	})
	if err != nil {
		return err
	}
	_, err = q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNamePolicy): string(policy)}})
	return err
}

func subscribeTopic(ctx context.Context, q *sqs.Client, topics *sns.Client, s subscriber, queueARN string) error {
	if err := allowSend(ctx, q, s.url, queueARN, "sns.amazonaws.com", s.target.Address); err != nil {
		return err
	}
	return consumer.Topic(ctx, topics, s.target.Address, queueARN)
}

func subscribeBus(ctx context.Context, q *sqs.Client, bus *eventbridge.Client, s subscriber, prefix, queueARN string) error {
	busName := s.target.Address
	if i := strings.Index(busName, ":event-bus/"); i >= 0 {
		busName = busName[i+len(":event-bus/"):]
	}
	rule, err := consumer.Rule(ctx, bus, busName, prefix+"-"+s.route+"-subscriber", queueARN, s.source)
	if err != nil {
		return err
	}
	return allowSend(ctx, q, s.url, queueARN, "events.amazonaws.com", rule)
}

// arrival is what a subscriber's queue got for one row.
type arrival struct {
	key, traceParent string
	attempt          int
	// source and detailType are an event's; empty from a topic.
	source, detailType string
}

// read turns a subscriber queue's message back into the row it carries:
// from the message attributes for a topic, from the event's detail for a
// bus.
func (s subscriber) read(m sqstypes.Message) (arrival, error) {
	attr := func(name string) string { return aws.ToString(m.MessageAttributes[name].StringValue) }
	if s.target.Kind == delivery.KindSNS {
		attempt, err := strconv.Atoi(attr(delivery.AttrAttempt))
		if err != nil {
			return arrival{}, fmt.Errorf("message without its %s attribute", delivery.AttrAttempt)
		}
		return arrival{key: attr(delivery.AttrKey), attempt: attempt, traceParent: attr(outbox.AttrTraceParent)}, nil
	}
	var ev struct {
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
		Detail     struct {
			Outflow struct {
				Key         string `json:"key"`
				Attempt     int    `json:"attempt"`
				TraceParent string `json:"traceparent"`
			} `json:"outflow"`
		} `json:"detail"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
		return arrival{}, fmt.Errorf("event is not JSON: %w", err)
	}
	o := ev.Detail.Outflow
	return arrival{key: o.Key, attempt: o.Attempt, traceParent: o.TraceParent, source: ev.Source, detailType: ev.DetailType}, nil
}

// consumeSubscriber receives from a subscriber queue until ctx ends,
// handing each message and its arrival (or the reason it cannot be read)
// to got before deleting it.
func consumeSubscriber(ctx context.Context, client *sqs.Client, s subscriber, got func(sqstypes.Message, arrival, error, time.Time)) {
	for ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId},
		})
		if err != nil {
			if ctx.Err() == nil {
				got(sqstypes.Message{}, arrival{}, fmt.Errorf("receive: %w", err), time.Now())
				time.Sleep(time.Second)
			}
			continue
		}
		at := time.Now()
		for _, m := range out.Messages {
			a, err := s.read(m)
			got(m, a, err, at)
			_, _ = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.url), ReceiptHandle: m.ReceiptHandle})
		}
	}
}
