package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// goErrs collects errors from goroutines other than the test's own (the
// engine's senders and claimers, which run a test's hooks, and goroutines a
// test starts), where require must not be called: FailNow ends only the
// goroutine that calls it. The test asserts err() in its own goroutine.
type goErrs struct {
	mu   sync.Mutex
	errs []error
}

func (g *goErrs) add(err error) {
	if err == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, err)
}

func (g *goErrs) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

// clock is a settable clock shared by the engine and the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(time.Now().UnixMilli())} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// harness is a table, three queues (one FIFO) routed as "orders",
// "emails" and "events.fifo", and the store and deliverer over them.
type harness struct {
	store  *dynamo.Store
	sqs    *delivery.Router
	routes delivery.Routes
	clock  *clock
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessShards(t, 4)
}

// newHarnessShards is newHarness with the given number of due-index
// shards: with one, the due order is the order a sweep claims in.
func newHarnessShards(t *testing.T, shards int) *harness {
	t.Helper()
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: awstest.NewTable(t), Shards: shards})
	require.NoError(t, err)
	routes := delivery.Routes{
		"orders":      awstest.NewQueue(t, false),
		"emails":      awstest.NewQueue(t, false),
		"events.fifo": awstest.NewQueue(t, true),
	}
	return &harness{store: store, sqs: sqsRouter(t, awstest.SQS(t), routes), routes: routes, clock: newClock()}
}

// sqsRouter is a deliverer to SQS routes over api.
func sqsRouter(t *testing.T, api delivery.SQSAPI, routes delivery.Routes) *delivery.Router {
	t.Helper()
	r, err := delivery.New(delivery.Clients{SQS: api}, routes, 0)
	require.NoError(t, err)
	return r
}

// testPolicy is fast: short backoff and lease, no wake grace.
func testPolicy() outbox.Policy {
	p := outbox.DefaultPolicy()
	p.MaxAttempts = 3
	p.BackoffBase = time.Second
	p.BackoffMax = time.Minute
	p.Lease = time.Minute
	p.WakeGrace = 0
	p.Concurrency = 4
	p.PageSize = 25
	p.BatchLinger = 5 * time.Millisecond
	return p
}

func (h *harness) engine(t *testing.T, p outbox.Policy, d outbox.Deliverer) *outbox.Engine {
	t.Helper()
	if d == nil {
		d = h.sqs
	}
	e, err := outbox.New(h.store, d, p, outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	return e
}

func (h *harness) stage(t *testing.T, rows ...outbox.Row) {
	t.Helper()
	for _, r := range rows {
		require.NoError(t, h.store.Stage(context.Background(), r, h.clock.Now()))
	}
}

func (h *harness) row(t *testing.T, key string) outbox.Row {
	t.Helper()
	r, err := h.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.NotNil(t, r, "row %s exists", key)
	return *r
}

func (h *harness) gone(t *testing.T, key string) {
	t.Helper()
	r, err := h.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Nil(t, r, "row %s was settled done and deleted", key)
}

func rowsFor(queue string, n int, group string) []outbox.Row {
	rows := make([]outbox.Row, n)
	for i := range rows {
		rows[i] = outbox.Row{
			Key:        queue + "-" + strconv.Itoa(i),
			Queue:      queue,
			Payload:    []byte(`{"n":` + strconv.Itoa(i) + `}`),
			Attributes: map[string]string{"source": "test", "index": strconv.Itoa(i)},
			Group:      group,
		}
	}
	return rows
}

// faultStore wraps a store and fails the settles doneErr picks.
type faultStore struct {
	outbox.Store
	doneErr func(outbox.Row) error
}

func (f faultStore) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	if err := f.doneErr(row); err != nil {
		return err
	}
	return f.Store.Done(ctx, row, now)
}
