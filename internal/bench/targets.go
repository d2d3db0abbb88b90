package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/subscriber"
)

// TargetKinds are the kinds of target DrainTargets measures, SQS first as
// the baseline.
var TargetKinds = []delivery.Kind{delivery.KindSQS, delivery.KindSNS, delivery.KindEventBridge}

// SendOp is the "Service.Operation" each kind of target is sent with.
var SendOp = map[delivery.Kind]string{
	delivery.KindSQS:         "SQS.SendMessageBatch",
	delivery.KindSNS:         "SNS.PublishBatch",
	delivery.KindEventBridge: "EventBridge.PutEvents",
}

// TargetResult is one target's drain against a real endpoint: rows staged
// for one route, swept to it, and read back from the queue behind it.
type TargetResult struct {
	Kind        delivery.Kind
	Rows        int
	PayloadSize int
	// Arrived counts the distinct rows a consumer read from the queue (the
	// queue itself, the topic's subscriber, the bus's rule target).
	Arrived    int
	Throughput Throughput
	Dispatch   *Requests // requests made by the dispatcher
}

// SendPerMessage is the target's send requests per row drained.
func (r TargetResult) SendPerMessage() float64 {
	return float64(r.Dispatch.Count(SendOp[r.Kind])) / float64(max(r.Throughput.Rows, 1))
}

// DynamoDBPerMessage is the dispatcher's DynamoDB requests (all, or only
// writes) per row drained.
func (r TargetResult) DynamoDBPerMessage(writesOnly bool) float64 {
	return float64(r.Dispatch.Total("DynamoDB", writesOnly)) / float64(max(r.Throughput.Rows, 1))
}

// TargetSource and TargetDetailType are the bench's event source and
// detail-type, given as the EventBridge route's options.
const (
	TargetSource     = "outflow.bench"
	TargetDetailType = "bench.row"
)

// DrainTargets drains rows rows (JSON objects of about payloadBytes) to
// each kind of target in turn, each on a new table with one route: an SQS
// queue; an SNS topic with a queue subscribed with raw delivery; an
// EventBridge bus with a rule sending every event to a queue. Rows are
// staged with the producer (checked against the route), then drained by
// one sweep with the default policy, counting the dispatcher's requests,
// while a consumer on its own uncounted client empties the queue. It fails
// if any row did not arrive.
func DrainTargets(ctx context.Context, endpoint string, rows, payloadBytes int) ([]TargetResult, error) {
	var out []TargetResult
	for _, kind := range TargetKinds {
		r, err := drainTarget(ctx, endpoint, kind, rows, payloadBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// targetRoute is the route every row of a target drain goes to.
const targetRoute = "target"

func drainTarget(ctx context.Context, endpoint string, kind delivery.Kind, rows, payloadBytes int) (res TargetResult, err error) {
	res = TargetResult{Kind: kind, Rows: rows, Dispatch: NewRequests()}
	setupCfg, err := endpointConfig(ctx, endpoint, NewRequests())
	if err != nil {
		return res, err
	}
	admin := dynamodb.NewFromConfig(setupCfg, noCRC)
	table := fmt.Sprintf("outflow-bench-%d", time.Now().UnixNano())
	if err := dynamo.CreateTable(ctx, admin, table); err != nil {
		return res, err
	}
	defer func() { _ = dynamo.DeleteTable(context.Background(), admin, table) }()
	target, queue, err := createTarget(ctx, setupCfg, kind, table)
	if err != nil {
		return res, err
	}
	routes := delivery.Routes{targetRoute: target}

	p, err := outflow.NewProducer(admin, outflow.Config{Table: table, Routes: routes.String(), Ordered: []string{}})
	if err != nil {
		return res, err
	}
	pad := strings.Repeat("x", max(payloadBytes-len(`{"n":0000000,"pad":""}`), 0))
	batch := make([]outflow.Row, 0, 500)
	for i := range rows {
		payload, err := json.Marshal(map[string]any{"n": i, "pad": pad})
		if err != nil {
			return res, err
		}
		batch = append(batch, outflow.Row{Key: Key(i), Queue: targetRoute, Payload: payload, Attributes: map[string]string{"type": "bench"}})
		if len(batch) == cap(batch) || i == rows-1 {
			if _, err := p.Put(ctx, batch...); err != nil {
				return res, err
			}
			res.PayloadSize = len(payload)
			batch = batch[:0]
		}
	}

	cfg, err := endpointConfig(ctx, endpoint, res.Dispatch)
	if err != nil {
		return res, err
	}
	store, sender, err := dispatcher(cfg, table, 4, routes)
	if err != nil {
		return res, err
	}
	finish := ConsumeAll(ctx, sqs.NewFromConfig(setupCfg), []string{queue})
	defer func() {
		got, cerr := finish()
		if cerr != nil && err == nil {
			err = cerr
		}
		res.Arrived = len(got.Arrivals)
		if err == nil && res.Arrived < rows {
			err = fmt.Errorf("%d of %d rows arrived", res.Arrived, rows)
		}
	}()
	pol := outbox.DefaultPolicy()
	pol.WakeGrace, pol.RowBudget = 0, 1<<30
	e, err := outbox.New(store, sender, pol)
	if err != nil {
		return res, err
	}
	res.Throughput = measure(rows, func() int {
		r, _ := e.Sweep(ctx)
		return r.Delivered
	})
	return res, nil
}

// createTarget makes the target of one kind, named after table, and the
// queue a consumer reads its messages from; it returns the route's target
// string and the queue's URL.
func createTarget(ctx context.Context, cfg aws.Config, kind delivery.Kind, table string) (target, queue string, err error) {
	sq := sqs.NewFromConfig(cfg)
	name := strings.ReplaceAll(table, ".", "-")
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", "", fmt.Errorf("create queue: %w", err)
	}
	queue = aws.ToString(q.QueueUrl)
	if kind == delivery.KindSQS {
		return queue, queue, nil
	}
	queueARN, err := subscriber.QueueARN(ctx, sq, queue)
	if err != nil {
		return "", "", err
	}
	switch kind {
	case delivery.KindSNS:
		api := sns.NewFromConfig(cfg)
		t, err := api.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
		if err != nil {
			return "", "", fmt.Errorf("create topic: %w", err)
		}
		if err := subscriber.Topic(ctx, api, aws.ToString(t.TopicArn), queueARN); err != nil {
			return "", "", err
		}
		return aws.ToString(t.TopicArn), queue, nil
	case delivery.KindEventBridge:
		api := eventbridge.NewFromConfig(cfg)
		b, err := api.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(name)})
		if err != nil {
			return "", "", fmt.Errorf("create bus: %w", err)
		}
		if _, err := subscriber.Rule(ctx, api, name, name, queueARN, TargetSource); err != nil {
			return "", "", err
		}
		return aws.ToString(b.EventBusArn) + "?source=" + TargetSource + "&detail-type=" + TargetDetailType, queue, nil
	}
	return "", "", fmt.Errorf("no target of kind %s", kind)
}
