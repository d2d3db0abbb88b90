package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// MotoResult is one drain of a backlog against a real endpoint.
type MotoResult struct {
	Rows        int
	Throughput  Throughput
	Stage       *Requests // requests made while staging
	Dispatch    *Requests // requests made by the dispatcher
	PayloadSize int
	ItemSize    int
	// OutOfOrder counts, for an ordered drain, the rows whose first
	// arrival came other than right after their predecessor's.
	OutOfOrder int
}

// outOfOrder counts the keys in first, the keys in order of first arrival,
// that did not arrive right after the row before them in their group of
// groupSize consecutive rows.
func outOfOrder(first []string, groupSize int) int {
	next := map[int]int{} // group -> index of the row expected next
	bad := 0
	for _, k := range first {
		i := index(k)
		g := i / groupSize
		if _, ok := next[g]; !ok {
			next[g] = g * groupSize
		}
		if i != next[g] {
			bad++
		}
		next[g] = max(next[g], i+1)
	}
	return bad
}

// endpointConfig is an instrumented config for a local endpoint.
func endpointConfig(ctx context.Context, endpoint string, reqs *Requests) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		return cfg, err
	}
	cfg.BaseEndpoint = aws.String(endpoint)
	cfg.HTTPClient = sdkhttp.Client(cfg.HTTPClient) // after loading: see handler.Serve
	reqs.Instrument(&cfg)
	return cfg, nil
}

// noCRC turns off the DynamoDB client's response checksum: moto's CRC32
// header does not always match its body.
func noCRC(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }

// dispatcher is the store and deliverer the functions build, over cfg
// (whose instrumentation counts their requests).
func dispatcher(cfg aws.Config, table string, shards int, routes delivery.Routes) (*dynamo.Store, *delivery.Router, error) {
	return dispatcherKeeping(cfg, table, shards, routes, dynamo.DefaultDoneRetention)
}

// dispatcherKeeping is dispatcher keeping delivered rows as done for
// retention (OUTFLOW_DONE_RETENTION; 0 deletes them).
func dispatcherKeeping(cfg aws.Config, table string, shards int, routes delivery.Routes, retention time.Duration) (*dynamo.Store, *delivery.Router, error) {
	store, err := dynamo.New(dynamodb.NewFromConfig(cfg, noCRC), dynamo.Config{Table: table, Shards: shards, DoneRetention: retention})
	if err != nil {
		return nil, nil, err
	}
	sender, err := delivery.New(delivery.ClientsFromConfig(cfg), routes, 0)
	if err != nil {
		return nil, nil, err
	}
	return store, sender, nil
}

// DrainOnEndpoint stages rows rows (payloadBytes each, over four queues,
// one FIFO) on a new table at endpoint, then drains them with the engine
// (naive false) or the naive baseline (naive true), counting requests,
// while a consumer per queue empties the queues.
func DrainOnEndpoint(ctx context.Context, endpoint string, rows, payloadBytes int, naive bool) (MotoResult, error) {
	return drainOnEndpoint(ctx, endpoint, rows, payloadBytes, naive, 0)
}

// DrainOrderedOnEndpoint is DrainOnEndpoint for ordered rows: every row
// goes to FIFOQueue, an ordered route for the producer and the engine
// (dead heads block), in groups of groupSize consecutive rows, each group
// staged in order.
func DrainOrderedOnEndpoint(ctx context.Context, endpoint string, rows, groupSize, payloadBytes int) (MotoResult, error) {
	return drainOnEndpoint(ctx, endpoint, rows, payloadBytes, false, max(groupSize, 1))
}

// createQueues makes one queue per name in Queues, named after table (a
// ".fifo" name a FIFO queue), and returns the routes to them.
func createQueues(ctx context.Context, api *sqs.Client, table string) (delivery.Routes, error) {
	routes := delivery.Routes{}
	for _, q := range Queues {
		name := strings.ReplaceAll(table+"-"+q, ".", "-")
		attrs := map[string]string{}
		if strings.HasSuffix(q, ".fifo") {
			name += ".fifo"
			attrs[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
		}
		out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return nil, fmt.Errorf("create queue: %w", err)
		}
		routes[q] = aws.ToString(out.QueueUrl)
	}
	return routes, nil
}

// drainOnEndpoint is DrainOnEndpoint, or with groupSize set its ordered
// variant.
func drainOnEndpoint(ctx context.Context, endpoint string, rows, payloadBytes int, naive bool, groupSize int) (res MotoResult, err error) {
	res = MotoResult{Rows: rows, Stage: NewRequests(), Dispatch: NewRequests(), PayloadSize: payloadBytes}
	stageCfg, err := endpointConfig(ctx, endpoint, res.Stage)
	if err != nil {
		return res, err
	}
	admin := dynamodb.NewFromConfig(stageCfg, noCRC)
	table := fmt.Sprintf("outflow-bench-%d", time.Now().UnixNano())
	if err := dynamo.CreateTable(ctx, admin, table); err != nil {
		return res, err
	}
	defer func() { _ = dynamo.DeleteTable(context.Background(), admin, table) }()
	routes, err := createQueues(ctx, sqs.NewFromConfig(stageCfg), table)
	if err != nil {
		return res, err
	}
	pcfg := outflow.Config{Table: table, Ordered: []string{}}
	if groupSize > 0 {
		pcfg.Ordered = []string{FIFOQueue}
	}
	p, err := outflow.NewProducer(admin, pcfg)
	if err != nil {
		return res, err
	}
	payload := []byte(strings.Repeat("x", payloadBytes))
	batch := make([]outflow.Row, 0, 500)
	flush := func() error {
		_, err := p.Put(ctx, batch...)
		batch = batch[:0]
		return err
	}
	for i := range rows {
		q := Queues[i%len(Queues)]
		r := outflow.Row{Key: Key(i), Queue: q, Payload: payload, Attributes: map[string]string{"type": "bench"}}
		switch {
		case groupSize > 0:
			r.Queue, r.Group = FIFOQueue, fmt.Sprintf("g%d", i/groupSize)
		case strings.HasSuffix(q, ".fifo"):
			r.Group = fmt.Sprintf("g%d", i%16)
		}
		if batch = append(batch, r); len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	if err := flush(); err != nil {
		return res, err
	}
	res.Stage.mu.Lock()
	res.ItemSize = res.Stage.sizes[Key(0)]
	res.Stage.mu.Unlock()

	cfg, err := endpointConfig(ctx, endpoint, res.Dispatch)
	if err != nil {
		return res, err
	}
	store, sender, err := dispatcher(cfg, table, 4, routes)
	if err != nil {
		return res, err
	}

	// A consumer per queue, on its own uncounted client, empties the
	// queues as they fill, as consumers would.
	consumerCfg, err := endpointConfig(ctx, endpoint, NewRequests())
	if err != nil {
		return res, err
	}
	finish := ConsumeAll(ctx, sqs.NewFromConfig(consumerCfg), slices.Collect(maps.Values(routes)))
	defer func() {
		got, cerr := finish()
		if cerr != nil && err == nil {
			err = cerr
		}
		if groupSize > 0 {
			res.OutOfOrder = outOfOrder(got.First, groupSize)
		}
	}()

	if naive {
		res.Throughput = measure(rows, func() int {
			n, _ := Naive(ctx, store, sender, time.Now, time.Minute, 8, 100)
			return n
		})
		return res, nil
	}
	pol := outbox.DefaultPolicy()
	pol.WakeGrace, pol.RowBudget = 0, 1<<30
	if groupSize > 0 {
		pol.Ordered = map[string]outbox.DeadHead{FIFOQueue: outbox.DeadHeadBlock}
	}
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

// Percentiles returns the p50 and p99 of ds.
func Percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*50/100], s[(len(s)-1)*99/100]
}
