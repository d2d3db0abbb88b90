package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// BackstopGrace is the dispatcher's default wake grace, the age past
// which the backstop takes an unindexed row for missed.
const BackstopGrace = 15 * time.Second

// BackstopRun is one run of the lean backstop (dynamo.Backstop.Run), as
// each scheduled sweep makes one, and what its scan read.
type BackstopRun struct {
	// Pages and Scanned are the run's Scan requests and the items they
	// evaluated; Indexed the missed rows it put in the due index.
	Pages, Scanned, Indexed int
	PassDone                bool
	// ScannedBytes is the size (ItemSize) of every item the run's pages
	// evaluated, each page read again, whole, on an uncounted client; RRU
	// what those pages cost by DynamoDB's rule (ScanRRU of each page).
	ScannedBytes int
	RRU          float64
	// Elapsed is the run's time against moto, the shadow reads left out.
	Elapsed time.Duration
}

// BackstopMeasure is a backstop pass over a table built for it: lean rows
// staged by the producer and settled as the wake settles them (tombstones,
// status done under the default retention), and a few left pending with
// no shard, as rows the stream never delivered would be.
type BackstopMeasure struct {
	Tombstones, Missed int
	// Items are the items the pass evaluated (rows, and the table's own
	// items), ItemBytes their mean size.
	Items     int
	ItemBytes float64
	// Runs are the backstop's runs, one per sweep, until its pass ended.
	Runs []BackstopRun
	// Requests are the backstop's own requests over every run.
	Requests *Requests
	// Build is how long staging and settling the table took.
	Build time.Duration
}

// Pages is the Scan requests of the whole pass.
func (m BackstopMeasure) Pages() int {
	n := 0
	for _, r := range m.Runs {
		n += r.Pages
	}
	return n
}

// RRU is the scan's read units over the whole pass.
func (m BackstopMeasure) RRU() float64 {
	t := 0.0
	for _, r := range m.Runs {
		t += r.RRU
	}
	return t
}

// Found counts the missed rows the pass put in the due index.
func (m BackstopMeasure) Found() int {
	n := 0
	for _, r := range m.Runs {
		n += r.Indexed
	}
	return n
}

// Elapsed is the runs' time against moto.
func (m BackstopMeasure) Elapsed() time.Duration {
	var d time.Duration
	for _, r := range m.Runs {
		d += r.Elapsed
	}
	return d
}

// ScanRRU is the read units of one Scan or Query page that evaluated
// bytes of items: DynamoDB sums the sizes of every item the page read
// (before any filter or projection) and rounds the sum up to the next
// 4 KB; an eventually consistent read costs half a unit per 4 KB.
func ScanRRU(bytes int, consistent bool) float64 {
	units := float64((max(bytes, 1) + 4095) / 4096)
	if consistent {
		return units
	}
	return units / 2
}

// MeasureBackstop builds a table of tombstones lean rows, settled, and
// missed lean rows left pending among them, then runs the backstop
// (default budget: dynamo.DefaultBackstopPages pages of
// dynamo.DefaultBackstopPageSize items per run) until its pass ends,
// measuring each run's scan by the items it evaluated. Its rows carry the
// bench's payload (PayloadBytes).
func MeasureBackstop(ctx context.Context, endpoint string, tombstones, missed int) (BackstopMeasure, error) {
	return MeasureBackstopOf(ctx, endpoint, tombstones, missed, PayloadBytes)
}

// MeasureBackstopOf is MeasureBackstop with rows of payloadBytes-byte
// payloads.
func MeasureBackstopOf(ctx context.Context, endpoint string, tombstones, missed, payloadBytes int) (m BackstopMeasure, err error) {
	m = BackstopMeasure{Tombstones: tombstones, Missed: missed, Requests: NewRequests()}
	plainCfg, err := endpointConfig(ctx, endpoint, NewRequests())
	if err != nil {
		return m, err
	}
	plain := dynamodb.NewFromConfig(plainCfg, noCRC)
	table := fmt.Sprintf("outflow-backstop-%d", time.Now().UnixNano())
	if err := dynamo.CreateTable(ctx, plain, table); err != nil {
		return m, err
	}
	defer func() { _ = dynamo.DeleteTable(context.Background(), plain, table) }()

	start := time.Now()
	rows := tombstones + missed
	step := max(rows/max(missed, 1), 1)
	isMissed := func(i int) bool { return missed > 0 && i%step == 0 && i/step < missed }
	if err := buildTable(ctx, plain, table, rows, payloadBytes, isMissed); err != nil {
		return m, err
	}
	m.Build = time.Since(start)

	countedCfg, err := endpointConfig(ctx, endpoint, m.Requests)
	if err != nil {
		return m, err
	}
	meter := &scanMeter{AuditAPI: dynamodb.NewFromConfig(countedCfg, noCRC), shadow: plain}
	b, err := dynamo.NewBackstop(meter, dynamo.Config{Table: table, Shards: 8, DoneRetention: dynamo.DefaultDoneRetention}, BackstopGrace, true)
	if err != nil {
		return m, err
	}
	// Every row is older than the grace at a clock a minute on.
	now := time.Now().Add(time.Minute + BackstopGrace)
	// A page ends at PageSize items or 1 MB: at large items, before.
	perPage := max(min(b.PageSize, (1<<20)/(payloadBytes+1)), 1)
	maxRuns := rows/(b.Pages*perPage) + 3
	for range maxRuns {
		meter.reset()
		t0 := time.Now()
		res, err := b.Run(ctx, now)
		if err != nil {
			return m, fmt.Errorf("backstop run: %w", err)
		}
		elapsed := time.Since(t0)
		bytes, rru, items, shadowTime, merr := meter.read()
		if merr != nil {
			return m, merr
		}
		if items != res.Scanned {
			return m, fmt.Errorf("backstop run: the shadow scans read %d items, the backstop's scans evaluated %d", items, res.Scanned)
		}
		m.Runs = append(m.Runs, BackstopRun{Pages: res.Pages, Scanned: res.Scanned, Indexed: res.Indexed, PassDone: res.PassDone,
			ScannedBytes: bytes, RRU: rru, Elapsed: elapsed - shadowTime})
		m.Items += res.Scanned
		m.ItemBytes += float64(bytes)
		if res.PassDone {
			m.ItemBytes /= float64(max(m.Items, 1))
			if found := m.Found(); found != missed {
				return m, fmt.Errorf("backstop pass: found %d of the %d missed rows", found, missed)
			}
			return m, nil
		}
	}
	return m, fmt.Errorf("backstop: no pass ended in %d runs", maxRuns)
}

// BackstopTemplates is how many rows per queue buildTable stages and settles
// through the producer and the store.
const BackstopTemplates = 4

// buildTable fills table with rows rows, keys Key(0) on, over Queues, of
// payloadBytes-byte payloads: the missed ones lean rows staged by the producer
// and left pending, with no shard, as rows the stream never delivered;
// the others tombstones, lean rows staged by the producer and settled as
// the wake settles them. Only a few are staged and settled so (BackstopTemplates
// a queue); the rest are copies of those tombstones under their own keys,
// written 25 at a time, so that a large table builds in seconds on moto.
func buildTable(ctx context.Context, api *dynamodb.Client, table string, rows, payloadBytes int, missed func(int) bool) error {
	var real, copies []int
	for i := range rows {
		if missed(i) || len(real)-countMissed(real, missed) < BackstopTemplates*len(Queues) {
			real = append(real, i)
		} else {
			copies = append(copies, i)
		}
	}
	if err := stageLean(ctx, api, table, real, payloadBytes); err != nil {
		return err
	}
	tomb, err := settleAsTheWake(ctx, api, table, missed)
	if err != nil {
		return err
	}
	byQueue := map[string]map[string]types.AttributeValue{}
	for _, it := range tomb {
		if q, ok := it[dynamo.AttrQueue].(*types.AttributeValueMemberS); ok {
			byQueue[q.Value] = it
		}
	}
	for _, q := range Queues {
		if byQueue[q] == nil {
			return fmt.Errorf("no tombstone of queue %s to copy", q)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range 4 {
		wg.Go(func() {
			for start := w * 25; start < len(copies); start += 4 * 25 {
				var reqs []types.WriteRequest
				for _, i := range copies[start:min(start+25, len(copies))] {
					it := maps.Clone(byQueue[Queues[i%len(Queues)]])
					it[dynamo.AttrKey] = &types.AttributeValueMemberS{Value: Key(i)}
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
				}
				if err := batchWrite(ctx, api, table, reqs); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func countMissed(keys []int, missed func(int) bool) int {
	n := 0
	for _, i := range keys {
		if missed(i) {
			n++
		}
	}
	return n
}

// batchWrite writes reqs, again until none is left unprocessed.
func batchWrite(ctx context.Context, api *dynamodb.Client, table string, reqs []types.WriteRequest) error {
	for len(reqs) > 0 {
		out, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
		if err != nil {
			return fmt.Errorf("write tombstones: %w", err)
		}
		reqs = out.UnprocessedItems[table]
	}
	return nil
}

// stageLean stages the rows of keys (Key(i), over Queues, payloads of
// payloadBytes) lean with the producer.
func stageLean(ctx context.Context, api *dynamodb.Client, table string, keys []int, payloadBytes int) error {
	p, err := outflow.NewProducer(api, outflow.Config{Table: table, Shards: 8, Ordered: []string{}, Lean: true})
	if err != nil {
		return err
	}
	payload := []byte(strings.Repeat("x", payloadBytes))
	rows := make([]outflow.Row, 0, len(keys))
	for _, i := range keys {
		r := outflow.Row{Key: Key(i), Queue: Queues[i%len(Queues)], Payload: payload, Attributes: map[string]string{"type": "bench"}}
		if strings.HasSuffix(r.Queue, ".fifo") {
			r.Group = fmt.Sprintf("g%d", i%16)
		}
		rows = append(rows, r)
	}
	if _, err := p.Put(ctx, rows...); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	return nil
}

// settleAsTheWake settles every staged row but the missed ones as the
// wake settles a row it sent from its stream image: the store's Done of
// the row as staged, unclaimed, which under the default retention keeps
// it as done (a tombstone) until its TTL. It returns the tombstones as
// stored.
func settleAsTheWake(ctx context.Context, api *dynamodb.Client, table string, missed func(int) bool) ([]map[string]types.AttributeValue, error) {
	store, err := dynamo.New(api, dynamo.Config{Table: table, Shards: 8, DoneRetention: dynamo.DefaultDoneRetention})
	if err != nil {
		return nil, err
	}
	scan := func() ([]map[string]types.AttributeValue, error) {
		var items []map[string]types.AttributeValue
		pages := dynamodb.NewScanPaginator(api, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		for pages.HasMorePages() {
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("read the staged rows: %w", err)
			}
			for _, it := range out.Items {
				if k := scannedRowKey(it); k >= 0 && !missed(k) {
					items = append(items, it)
				}
			}
		}
		return items, nil
	}
	staged, err := scan()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, it := range staged {
		row, err := dynamo.Decode(it)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", row.Key, err)
		}
		row.Unclaimed = true
		if err := store.Done(ctx, row, now); err != nil {
			return nil, fmt.Errorf("settle %s: %w", row.Key, err)
		}
	}
	return scan()
}

// scannedRowKey is the bench index of a row item's key, -1 for any other
// item.
func scannedRowKey(it map[string]types.AttributeValue) int {
	k := keyOf(it)
	if k == "" || dynamo.IsReservedKey(k) {
		return -1
	}
	return index(k)
}

// scanMeter passes the backstop's requests on, and reads every Scan page
// it makes again, whole (no filter, no projection), from the same place
// with the same limit, on an uncounted client: the items DynamoDB bills
// the page for, since the filter and the projection apply after the read.
type scanMeter struct {
	dynamo.AuditAPI
	shadow *dynamodb.Client

	mu    sync.Mutex
	bytes int
	rru   float64
	items int
	// shadowTime is the time the shadow scans took, which the run's own
	// time leaves out.
	shadowTime time.Duration
	err        error
}

func (s *scanMeter) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	// Read first: the backstop then indexes what it found, which would
	// add a shard to an item the page evaluated before it had one.
	t0 := time.Now()
	whole, serr := s.shadow.Scan(ctx, &dynamodb.ScanInput{TableName: in.TableName, Limit: in.Limit,
		ExclusiveStartKey: maps.Clone(in.ExclusiveStartKey), ConsistentRead: in.ConsistentRead})
	shadowed := time.Since(t0)
	out, err := s.AuditAPI.Scan(ctx, in, opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shadowTime += shadowed
	if err != nil {
		return out, err
	}
	if serr != nil {
		s.err = errors.Join(s.err, fmt.Errorf("shadow scan: %w", serr))
		return out, nil
	}
	if int(out.ScannedCount) != len(whole.Items) || !sameKey(out.LastEvaluatedKey, whole.LastEvaluatedKey) {
		s.err = errors.Join(s.err, fmt.Errorf("shadow scan: read %d items, the page evaluated %d", len(whole.Items), out.ScannedCount))
	}
	n := 0
	for _, it := range whole.Items {
		n += ItemSize(it)
	}
	s.bytes += n
	s.items += len(whole.Items)
	s.rru += ScanRRU(n, aws.ToBool(in.ConsistentRead))
	return out, nil
}

// reset starts a run's count; read returns it.
func (s *scanMeter) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes, s.rru, s.items, s.shadowTime, s.err = 0, 0, 0, 0, nil
}

func (s *scanMeter) read() (bytes int, rru float64, items int, shadowTime time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.rru, s.items, s.shadowTime, s.err
}

// sameKey reports whether two LastEvaluatedKeys name the same item.
func sameKey(a, b map[string]types.AttributeValue) bool {
	return keyOf(a) == keyOf(b)
}
