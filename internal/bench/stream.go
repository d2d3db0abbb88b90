package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/streams"
)

// StreamConfig is a live run: producers staging rows for a while, the
// wake delivering them from the table's stream, and sweeps on a ticker.
type StreamConfig struct {
	// Rows are staged evenly over Stage by Producers producers.
	Rows      int
	Stage     time.Duration
	Producers int
	// Shards is the due index's shard count (producers and engine).
	Shards int
	// Partitions sweeps, one per partition, start together on every Tick;
	// zero runs no sweep (the wake alone). Overlap instead starts two
	// whole-table sweeps together on every tick: what a sweep longer than
	// its schedule period did before OUTFLOW_SWEEP_RATE.
	Partitions int
	Overlap    bool
	Tick       time.Duration
	// Ordered puts every FIFO row in an ordered group (the route listed as
	// ordered), each producer owning its groups; Delayed is the share of
	// the other rows staged with a NotBefore a few seconds out, which the
	// wake leaves to the sweep.
	Ordered bool
	Delayed float64
	// Poll is the stream poller's interval; BatchSize caps the records of
	// one wake invocation (the template's WakeBatchSize).
	Poll      time.Duration
	BatchSize int
	// ClaimedWake strips the stream images from the wake's refs, so the
	// wake claims every row, as it did before its claim-free path: the
	// two are measured side by side.
	ClaimedWake bool
	// Lean has the producers stage with Config.Lean: every unordered row
	// due at once goes in with no shard, out of the due index, and the
	// wake settles it with one write that touches no index.
	Lean bool
	// DeleteDone settles delivered rows with a delete (the dispatcher's
	// OUTFLOW_DONE_RETENTION=0) rather than keeping each as done, a
	// tombstone, for the default retention.
	DeleteDone bool
	// Timeout bounds the whole run; rows not delivered by then are an
	// error.
	Timeout time.Duration
}

// StreamResult is what a live run counted.
type StreamResult struct {
	Rows      int
	Delivered int
	Elapsed   time.Duration
	// Runs and Conflicts per path: the engine's Result.Conflicts summed
	// over every sweep and every wake invocation.
	SweepRuns, WakeRuns           int
	SweepConflicts, WakeConflicts int
	SweepDelivered, WakeDelivered int
	// WakeRefusals and SweepRefusals are the refused conditional writes
	// seen in the responses to each path's requests.
	WakeRefusals, SweepRefusals *Refusals
	// Kinds says of every staged row whether it was "plain", "delayed"
	// (a NotBefore) or "ordered"; Staged when its Put returned.
	Kinds  map[string]string
	Staged map[string]time.Time
	// WakeLags are, for every row the wake was given, the time from its
	// staging to the invocation.
	WakeLags []time.Duration
	// Requests made by staging, by the wake's engine, by the sweeps' and
	// by the stream poller.
	Stage, Wake, Sweep, Stream *Requests
	// Records is every stream record read; WakeRecords the records of the
	// wake's invocations (after the template's filter).
	Records, WakeRecords int
	// Duplicates are rows a consumer received more than once.
	Duplicates int
	// Kept counts the delivered rows still in the table when the run
	// ended, read back on an uncounted client (tombstones: none when
	// DeleteDone), and KeptBytes their mean size by ItemSize.
	Kept      int
	KeptBytes float64
}

// Conflicts is Result.Conflicts summed over both paths.
func (r StreamResult) Conflicts() int { return r.SweepConflicts + r.WakeConflicts }

// Refused is every refused conditional write the middleware saw.
func (r StreamResult) Refused() int { return r.WakeRefusals.Total() + r.SweepRefusals.Total() }

// RefusedBy counts the refused writes by path, transition and the kind of
// row: "wake UpdateItem claim, delayed row".
func (r StreamResult) RefusedBy() map[string]int {
	out := map[string]int{}
	for path, f := range map[string]*Refusals{"wake": r.WakeRefusals, "sweep": r.SweepRefusals} {
		for k, n := range f.ByTransition() {
			out[path+" "+k] += n
		}
	}
	return out
}

// RefusedRows counts the refused writes by path and the kind of row.
func (r StreamResult) RefusedRows() map[string]int {
	out := map[string]int{}
	for path, f := range map[string]*Refusals{"wake": r.WakeRefusals, "sweep": r.SweepRefusals} {
		for _, k := range f.Keys() {
			out[path+", "+r.Kinds[k]+" row"]++
		}
	}
	return out
}

// PerThousand is n per 1,000 delivered messages.
func (r StreamResult) PerThousand(n int) float64 {
	return 1000 * float64(n) / float64(max(r.Delivered, 1))
}

// RunStream runs one live run against endpoint on a new table.
func RunStream(ctx context.Context, endpoint string, c StreamConfig) (res StreamResult, err error) {
	res = StreamResult{Rows: c.Rows, WakeRefusals: NewRefusals(), SweepRefusals: NewRefusals(), Stage: NewRequests(), Wake: NewRequests(), Sweep: NewRequests(), Stream: NewRequests(),
		Kinds: map[string]string{}, Staged: map[string]time.Time{}}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	stageCfg, err := endpointConfig(ctx, endpoint, res.Stage)
	if err != nil {
		return res, err
	}
	admin := dynamodb.NewFromConfig(stageCfg, noCRC)
	table := fmt.Sprintf("outflow-stream-%d", time.Now().UnixNano())
	if err := dynamo.CreateTable(ctx, admin, table); err != nil {
		return res, err
	}
	defer func() { _ = dynamo.DeleteTable(context.Background(), admin, table) }()
	desc, err := admin.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return res, fmt.Errorf("describe table: %w", err)
	}
	routes, err := createQueues(ctx, sqs.NewFromConfig(stageCfg), table)
	if err != nil {
		return res, err
	}
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
		for _, n := range got.Arrivals {
			res.Duplicates += n - 1
		}
	}()

	pol := outbox.DefaultPolicy()
	pol.RowBudget = 1 << 30
	if c.Ordered {
		pol.Ordered = map[string]outbox.DeadHead{FIFOQueue: outbox.DeadHeadBlock}
	}
	engineOn := func(reqs *Requests, refusals *Refusals) (*outbox.Engine, error) {
		cfg, err := endpointConfig(ctx, endpoint, reqs)
		if err != nil {
			return nil, err
		}
		refusals.Instrument(&cfg)
		retention := dynamo.DefaultDoneRetention
		if c.DeleteDone {
			retention = 0
		}
		store, sender, err := dispatcherKeeping(cfg, table, c.Shards, routes, retention)
		if err != nil {
			return nil, err
		}
		return outbox.New(store, sender, pol)
	}
	wakeEng, err := engineOn(res.Wake, res.WakeRefusals)
	if err != nil {
		return res, err
	}
	sweepEng, err := engineOn(res.Sweep, res.SweepRefusals)
	if err != nil {
		return res, err
	}
	streamCfg, err := endpointConfig(ctx, endpoint, res.Stream)
	if err != nil {
		return res, err
	}
	arn := aws.ToString(desc.Table.LatestStreamArn)
	poller := streams.NewPoller(dynamodbstreams.NewFromConfig(streamCfg), arn, streamtypes.ShardIteratorTypeLatest)
	if _, err := poller.Poll(ctx, 1000); err != nil {
		return res, fmt.Errorf("position the stream: %w", err)
	}

	var delivered atomic.Int64
	var mu sync.Mutex // guards res's counters below
	add := func(wake bool, r outbox.Result) {
		delivered.Add(int64(r.Delivered))
		mu.Lock()
		defer mu.Unlock()
		if wake {
			res.WakeRuns++
			res.WakeConflicts += r.Conflicts
			res.WakeDelivered += r.Delivered
		} else {
			res.SweepRuns++
			res.SweepConflicts += r.Conflicts
			res.SweepDelivered += r.Delivered
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 4)

	// The wake: the stream poller and, for every batch of inserted pending
	// rows (the template's filter), one wake invocation, one after another
	// as one stream shard's are.
	wg.Go(func() {
		t := time.NewTicker(c.Poll)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			recs, err := poller.Poll(runCtx, 1000)
			if err != nil {
				if runCtx.Err() == nil {
					errs <- err
				}
				return
			}
			var passed []streamtypes.Record
			for _, rec := range recs {
				if wakeFilter(rec) {
					passed = append(passed, rec)
				}
			}
			mu.Lock()
			res.Records += len(recs)
			res.WakeRecords += len(passed)
			mu.Unlock()
			for batch := range slices.Chunk(passed, max(c.BatchSize, 1)) {
				refs, _ := handler.DueInserts(streams.Event(arn, "us-east-1", batch), time.Now())
				if c.ClaimedWake {
					for i := range refs {
						refs[i].Image = nil
					}
				}
				mu.Lock()
				for _, ref := range refs {
					if at, ok := res.Staged[ref.Key]; ok {
						res.WakeLags = append(res.WakeLags, time.Since(at))
					}
				}
				mu.Unlock()
				var r outbox.Result
				if len(refs) > 0 {
					r, _ = wakeEng.DeliverRefs(runCtx, refs)
				}
				add(true, r)
			}
		}
	})

	// The sweeps: on every tick, the partitions' sweeps (or two whole
	// ones) start together; a tick that comes while they run is skipped,
	// as OUTFLOW_SWEEP_RATE makes a partition's sweeps never overlap.
	if c.Partitions > 0 || c.Overlap {
		wg.Go(func() {
			t := time.NewTicker(c.Tick)
			defer t.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-t.C:
				}
				parts := make([]outbox.Partition, 0, max(c.Partitions, 2))
				if c.Overlap {
					parts = append(parts, outbox.Whole, outbox.Whole)
				} else {
					for p := range c.Partitions {
						parts = append(parts, outbox.Partition{Index: p, Count: c.Partitions})
					}
				}
				var sw sync.WaitGroup
				for _, p := range parts {
					sw.Go(func() {
						r, err := sweepEng.SweepPartition(runCtx, p)
						if err != nil && runCtx.Err() == nil {
							errs <- err
						}
						add(false, r)
					})
				}
				sw.Wait()
			}
		})
	}

	// The producers.
	start := time.Now()
	stageErr := stage(runCtx, admin, table, c, func(rows []outflow.Row, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			kind := "plain"
			switch {
			case !r.NotBefore.IsZero():
				kind = "delayed"
			case c.Ordered && r.Group != "":
				kind = "ordered"
			}
			res.Kinds[r.Key], res.Staged[r.Key] = kind, at
		}
	})
	if stageErr != nil {
		stop()
		wg.Wait()
		return res, stageErr
	}
	for delivered.Load() < int64(c.Rows) {
		select {
		case err := <-errs:
			stop()
			wg.Wait()
			return res, err
		case <-ctx.Done():
			stop()
			wg.Wait()
			return res, fmt.Errorf("%d of %d rows delivered when the run timed out", delivered.Load(), c.Rows)
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.Elapsed = time.Since(start)
	stop()
	wg.Wait()
	res.Delivered = int(delivered.Load())
	// The write-unit arithmetic sizes every write by its row's staged
	// item, and indexes it as staged, which only the staging counter saw.
	for _, r := range []*Requests{res.Wake, res.Sweep} {
		r.StagedBy(res.Stage)
	}
	res.Kept, res.KeptBytes, err = keptRows(ctx, dynamodb.NewFromConfig(consumerCfg, noCRC), table, min(c.Rows, 50))
	return res, err
}

// keptRows reads the first n rows back, with consistent reads, and
// returns how many are still in the table and their mean size.
func keptRows(ctx context.Context, api *dynamodb.Client, table string, n int) (kept int, meanBytes float64, err error) {
	total := 0
	for i := range n {
		out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]dynamotypes.AttributeValue{dynamo.AttrKey: &dynamotypes.AttributeValueMemberS{Value: Key(i)}}})
		if err != nil {
			return 0, 0, fmt.Errorf("read back row %s: %w", Key(i), err)
		}
		if len(out.Item) > 0 {
			kept++
			total += ItemSize(out.Item)
		}
	}
	return kept, float64(total) / float64(max(kept, 1)), nil
}

// wakeFilter is the template's filter on the wake's stream mapping: an
// insert of a pending row.
func wakeFilter(rec streamtypes.Record) bool {
	if rec.EventName != streamtypes.OperationTypeInsert || rec.Dynamodb == nil {
		return false
	}
	s, ok := rec.Dynamodb.NewImage[dynamo.AttrStatus].(*streamtypes.AttributeValueMemberS)
	return ok && s.Value == string(outbox.StatusPending)
}

// stage runs c.Producers producers, each staging its share of c.Rows in
// small batches, paced to spread the rows evenly over c.Stage.
func stage(ctx context.Context, client *dynamodb.Client, table string, c StreamConfig, staged func([]outflow.Row, time.Time)) error {
	pcfg := outflow.Config{Table: table, Shards: c.Shards, Ordered: []string{}, Lean: c.Lean}
	if c.Ordered {
		pcfg.Ordered = []string{FIFOQueue}
	}
	p, err := outflow.NewProducer(client, pcfg)
	if err != nil {
		return err
	}
	const batch = 5
	payload := []byte(strings.Repeat("x", PayloadBytes))
	every := c.Stage / time.Duration(max(c.Rows/batch, 1)) * time.Duration(c.Producers)
	var wg sync.WaitGroup
	errs := make(chan error, c.Producers)
	for w := range c.Producers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 17))
			t := time.NewTicker(every)
			defer t.Stop()
			rows := make([]outflow.Row, 0, batch)
			for i := w * batch; i < c.Rows; i += c.Producers * batch {
				rows = rows[:0]
				for j := i; j < min(i+batch, c.Rows); j++ {
					r := outflow.Row{Key: Key(j), Queue: Queues[j%len(Queues)], Payload: payload, Attributes: map[string]string{"type": "bench"}}
					switch {
					case strings.HasSuffix(r.Queue, ".fifo"):
						// Each producer owns its groups, so no two stage
						// into one group at once.
						r.Group = fmt.Sprintf("p%d-g%d", w, rng.IntN(8))
					case rng.Float64() < c.Delayed:
						r.NotBefore = time.Now().Add(time.Duration(1+rng.IntN(8)) * time.Second)
					}
					rows = append(rows, r)
				}
				at := time.Now()
				if _, err := p.Put(ctx, rows...); err != nil {
					errs <- fmt.Errorf("stage: %w", err)
					return
				}
				staged(rows, at)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// WakeBatch times the wake's DeliverKeys over rows rows in one call, on
// the synthetic store and sink with these latencies: the Lambda duration
// of one invocation of that many records.
func WakeBatch(rows int, storeLat, sendLat time.Duration) (Throughput, error) {
	store := NewSynthStore(rows, 4, Queues, PayloadBytes, epoch)
	store.Latency = storeLat
	e, err := outbox.New(store, &Sink{Latency: sendLat}, policy(16), outbox.WithClock(func() time.Time { return epoch }))
	if err != nil {
		return Throughput{}, err
	}
	keys := make([]string, rows)
	for i := range keys {
		keys[i] = Key(i)
	}
	return measure(rows, func() int {
		res, _ := e.DeliverKeys(context.Background(), keys)
		return res.Delivered
	}), nil
}
