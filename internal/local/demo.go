package local

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// DemoParams are the template parameters the demo runs with: a small
// budget and short backoff, so a failing row dead-letters in seconds, and
// a short wake grace.
var DemoParams = map[string]string{
	"MaxAttempts":        "3",
	"BackoffBaseSeconds": "1",
	"BackoffMultiplier":  "2",
	"WakeGraceSeconds":   "2",
	// The FIFO route keeps staging order per group: the demo checks it.
	"OrderedRoutes": "events.fifo",
}

// DemoBrokenRoute is the route the demo adds to a queue that does not
// exist: sends to it fail (transiently, as far as Outflow can tell) until
// the row's budget is spent.
const DemoBrokenRoute = "audit"

// Demo rows.
const (
	demoOrders  = 30
	demoEvents  = 15
	demoDelay   = 4 * time.Second
	demoNoRoute = "payments"
	keyNoRoute  = "demo-payments-1"
	keyBroken   = "demo-audit-1"
	keyDelayed  = "demo-orders-delayed"
	// demoDetailType is the detail-type of the demo's event when its route
	// has no default.
	demoDetailType = "DemoEvent"
	demoDeadline   = 90 * time.Second
)

// QueueReport is one queue's line of the demo summary.
type QueueReport struct {
	Staged       int `json:"staged"`
	Delivered    int `json:"delivered"`
	Retried      int `json:"retried"`
	DeadLettered int `json:"dead_lettered"`
}

// DemoReport is what the demo saw.
type DemoReport struct {
	Queues       map[string]*QueueReport `json:"queues"`
	Staged       int                     `json:"staged"`
	Delivered    int                     `json:"delivered"`
	Duplicates   int                     `json:"duplicates"`
	DeadLettered int                     `json:"dead_lettered"`
	// OrderedGroups counts the groups of ordered routes whose first
	// arrivals were checked against staging order.
	OrderedGroups int `json:"ordered_groups"`
	// TraceParents counts the delivered rows whose first arrival carried
	// the traceparent they were staged with.
	TraceParents int `json:"trace_parents"`
	// EffectsOnce counts the delivered rows whose effect the demo's
	// consumer (package consume's Inbox) applied exactly once.
	EffectsOnce int `json:"effects_applied_once"`
	// Subscribers are the consumer's queues behind the SNS and EventBridge
	// routes, one line each.
	Subscribers []SubscriberReport `json:"subscribers"`
	// Sweeps counts the finished sweeps by partition ("0/2", "1/2"; "" for
	// an unpartitioned sweep).
	Sweeps  map[string]int `json:"sweeps"`
	WakeP50 time.Duration  `json:"wake_p50_ns"`
	WakeP99 time.Duration  `json:"wake_p99_ns"`
	Elapsed time.Duration  `json:"elapsed_ns"`
	// Problems lists every way the outcome differs from what was staged;
	// empty means the demo passed.
	Problems []string `json:"problems"`
}

// SubscriberReport is what a subscriber queue behind a topic or a bus got.
type SubscriberReport struct {
	Route string `json:"route"`
	// Kind is SNS or EventBridge; Via says how messages reach the queue.
	Kind      string `json:"kind"`
	Via       string `json:"via"`
	Delivered int    `json:"delivered"`
	// TraceParents counts the rows that arrived with their traceparent: a
	// message attribute from a topic, detail.outflow.traceparent from a bus.
	TraceParents int `json:"trace_parents"`
}

// OK reports whether every count matched what was staged.
func (d DemoReport) OK() bool { return len(d.Problems) == 0 }

// Demo stages a known set of rows and checks what arrives.
type Demo struct {
	mu       sync.Mutex
	staged   map[string]stagedRow
	received map[string][]received
	// arrivals numbers the messages in the order the consumers got them.
	arrivals int
	// groups holds each ordered group's keys in staging order.
	groups map[string][]string
	sweeps map[string]int
	// subs are the subscriber queues behind the SNS and EventBridge routes;
	// subErrs the reasons any of their messages could not be read.
	subs    []subscriber
	subErrs map[string]bool
	// consumer applies what arrives, once Run has made its table.
	consumer atomic.Pointer[effects]
}

type stagedRow struct {
	queue   string
	at      time.Time
	deliver bool // expected to arrive (not a dead letter)
	delayed bool
	// traceParent is the W3C trace context the row was staged with.
	traceParent string
	// source and detailType are what an event from an EventBridge route
	// must carry; empty for other routes.
	source, detailType string
}

type received struct {
	queue       string
	attempt     int
	at          time.Time
	n           int // arrival number, for order
	traceParent string
	// source and detailType are an event's (from a bus's subscriber).
	source, detailType string
}

// NewDemo returns a demo and the runner options it needs: its template
// parameters (unless opts already sets them), its broken route, and hooks
// that record what the consumers receive.
func NewDemo(opts Options) (Options, *Demo) {
	d := &Demo{staged: map[string]stagedRow{}, received: map[string][]received{}, groups: map[string][]string{}, sweeps: map[string]int{}, subErrs: map[string]bool{}}
	if opts.Params == nil {
		opts.Params = map[string]string{}
	}
	for k, v := range DemoParams {
		if _, set := opts.Params[k]; !set {
			opts.Params[k] = v
		}
	}
	// SQS clients send to their endpoint and name the queue in the request,
	// so this URL is never dialled: the endpoint answers QueueDoesNotExist.
	opts.ExtraRoutes = DemoBrokenRoute + "=http://127.0.0.1:1/000000000000/outflow-missing-queue"
	opts.OnMessage = func(queue string, m sqstypes.Message, at time.Time) {
		key := aws.ToString(m.MessageAttributes[delivery.AttrKey].StringValue)
		attempt, _ := strconv.Atoi(aws.ToString(m.MessageAttributes[delivery.AttrAttempt].StringValue))
		// Applied before it counts as arrived: once every row arrived,
		// every effect is in.
		if e := d.consumer.Load(); e != nil {
			e.apply(queue, m)
		}
		d.record(key, received{queue: queue, attempt: attempt, at: at, traceParent: aws.ToString(m.MessageAttributes[outbox.AttrTraceParent].StringValue)})
	}
	opts.OnSweep = func(s telemetry.Summary) {
		d.mu.Lock()
		d.sweeps[s.Partition]++
		d.mu.Unlock()
	}
	return opts, d
}

// record notes one arrival of key.
func (d *Demo) record(key string, r received) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.arrivals++
	r.n = d.arrivals
	d.received[key] = append(d.received[key], r)
}

// Run stages the demo rows through the public producer API, waits until
// everything is delivered or dead-lettered (or the deadline), and reports.
// progress, if not nil, gets a live status line.
func (d *Demo) Run(ctx context.Context, r *Runner, progress io.Writer, interactive bool) (DemoReport, error) {
	start := time.Now()
	db := dynamodb.NewFromConfig(r.AWS, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	shards, _ := strconv.Atoi(r.Stack.Env["SweepFunction"]["OUTFLOW_SHARDS"])
	ordered, err := config.ParseOrdered(r.Stack.Env["SweepFunction"]["OUTFLOW_ORDERED"])
	if err != nil {
		return DemoReport{}, err
	}
	p, err := outflow.NewProducer(db, outflow.Config{Table: r.Stack.Table, Shards: shards, Ordered: append([]string{}, slices.Sorted(maps.Keys(ordered))...)})
	if err != nil {
		return DemoReport{}, err
	}
	op, err := dynamo.NewOperator(db, dynamo.Config{Table: r.Stack.Table, Shards: shards})
	if err != nil {
		return DemoReport{}, err
	}

	// The consumer's queues behind the topic and the bus, read until the
	// demo ends.
	routes, err := delivery.ParseRoutes(r.Stack.Env["SweepFunction"]["OUTFLOW_ROUTES"])
	if err != nil {
		return DemoReport{}, err
	}
	targets, err := routes.Targets()
	if err != nil {
		return DemoReport{}, err
	}
	if d.subs, err = subscribe(ctx, r.AWS, r.Stack.Prefix, targets); err != nil {
		return DemoReport{}, err
	}
	subCtx, stopSubs := context.WithCancel(ctx)
	var subsDone sync.WaitGroup
	defer func() { stopSubs(); subsDone.Wait() }()
	client := sqs.NewFromConfig(r.AWS)
	consumer, err := newEffects(ctx, db, r.Stack.Prefix)
	if err != nil {
		return DemoReport{}, err
	}
	d.consumer.Store(consumer)
	for _, s := range d.subs {
		subsDone.Go(func() {
			consumeSubscriber(subCtx, client, s, func(m sqstypes.Message, a arrival, err error, at time.Time) {
				if err != nil {
					d.mu.Lock()
					d.subErrs[fmt.Sprintf("%s (%s) → %s: %v", s.route, s.target.Kind, s.via(), err)] = true
					d.mu.Unlock()
					return
				}
				consumer.apply(s.route, m) // before it counts as arrived, as above
				d.record(a.key, received{queue: s.route, attempt: a.attempt, at: at, traceParent: a.traceParent, source: a.source, detailType: a.detailType})
			})
		})
	}

	var rows []outflow.Row
	add := func(row outflow.Row, deliver bool) {
		// Every row carries a trace context, as a producer inside a traced
		// request would (Put fills it from the context's span).
		row.TraceParent = newTraceParent()
		rows = append(rows, row)
		d.mu.Lock()
		d.staged[row.Key] = stagedRow{queue: row.Queue, deliver: deliver, delayed: !row.NotBefore.IsZero(), traceParent: row.TraceParent}
		d.mu.Unlock()
	}
	for i := range demoOrders {
		add(outflow.Row{Key: fmt.Sprintf("demo-orders-%02d", i), Queue: "orders", Payload: []byte(fmt.Sprintf(`{"order":%d}`, i)),
			Attributes: map[string]string{"type": "order.created"}}, true)
	}
	for i := range demoEvents {
		row := outflow.Row{Key: fmt.Sprintf("demo-events-%02d", i), Queue: "events.fifo", Group: fmt.Sprintf("tenant-%d", i%3),
			Payload: []byte(fmt.Sprintf(`{"event":%d}`, i))}
		add(row, true)
		if _, ok := ordered[row.Queue]; ok {
			d.groups[row.Group] = append(d.groups[row.Group], row.Key)
		}
	}
	for _, s := range d.subs {
		row := outflow.Row{Key: "demo-" + s.route + "-1", Queue: s.route, Payload: []byte(fmt.Sprintf(`{"demo":%q}`, s.route))}
		if s.target.FIFO {
			row.Group = "demo"
		}
		if s.target.Kind == delivery.KindEventBridge {
			row.Attributes = map[string]string{}
			if s.target.Source == "" {
				row.Attributes[delivery.AttrSource] = s.source
			}
			if s.target.DetailType == "" {
				row.Attributes[delivery.AttrDetailType] = demoDetailType
			}
		}
		add(row, true)
		if s.target.Kind == delivery.KindEventBridge {
			d.mu.Lock()
			st := d.staged[row.Key]
			st.source, st.detailType = s.source, cmp.Or(s.target.DetailType, demoDetailType)
			d.staged[row.Key] = st
			d.mu.Unlock()
		}
	}
	add(outflow.Row{Key: keyDelayed, Queue: "orders", Payload: []byte(`{"order":"later"}`), NotBefore: time.Now().Add(demoDelay)}, true)
	add(outflow.Row{Key: keyNoRoute, Queue: demoNoRoute, Payload: []byte(`{"charge":1}`)}, false)
	add(outflow.Row{Key: keyBroken, Queue: DemoBrokenRoute, Payload: []byte(`{"audit":1}`)}, false)

	// Stage one by one, as an application would, timing each from its write.
	for _, row := range rows {
		d.mu.Lock()
		s := d.staged[row.Key]
		s.at = time.Now()
		d.staged[row.Key] = s
		d.mu.Unlock()
		if _, err := p.Put(ctx, row); err != nil {
			return DemoReport{}, fmt.Errorf("stage %s: %w", row.Key, err)
		}
	}

	wantDelivered := 0
	for _, row := range rows {
		if d.staged[row.Key].deliver {
			wantDelivered++
		}
	}
	deadline := time.Now().Add(demoDeadline)
	last := time.Time{}
	var dead []dynamo.DeadRef
	for {
		dead, err = op.ListDead(ctx, dynamo.DeadQuery{}, 0)
		if err != nil {
			return DemoReport{}, err
		}
		delivered := d.deliveredCount()
		done := delivered == wantDelivered && len(dead) >= 2
		if progress != nil && (interactive || time.Since(last) >= 2*time.Second || done) {
			line := fmt.Sprintf("staged %d · delivered %d/%d · dead letters %d/2 · sweeps %d · %.1fs",
				len(rows), delivered, wantDelivered, len(dead), d.sweepCount(), time.Since(start).Seconds())
			if interactive {
				fmt.Fprintf(progress, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(progress, line)
			}
			last = time.Now()
		}
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	if progress != nil && interactive {
		fmt.Fprintln(progress)
	}
	// Let the consumers catch any duplicate still in flight.
	time.Sleep(500 * time.Millisecond)
	rep := d.report(dead, time.Since(start))
	once, problems, err := consumer.once(ctx, d.deliveredKeys())
	if err != nil {
		return rep, err
	}
	rep.EffectsOnce = once
	if len(problems) > 0 {
		rep.Problems = append(rep.Problems, problems...)
		slices.Sort(rep.Problems)
	}
	return rep, ctx.Err()
}

// deliveredKeys are the keys of the rows that arrived and were meant to.
func (d *Demo) deliveredKeys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	for k := range d.received {
		if d.staged[k].deliver {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func (d *Demo) deliveredCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for k := range d.received {
		if d.staged[k].deliver {
			n++
		}
	}
	return n
}

func (d *Demo) sweepCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.sweeps {
		n += c
	}
	return n
}

func (d *Demo) report(dead []dynamo.DeadRef, elapsed time.Duration) DemoReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	rep := DemoReport{Queues: map[string]*QueueReport{}, Staged: len(d.staged), Elapsed: elapsed, Sweeps: maps.Clone(d.sweeps)}
	q := func(name string) *QueueReport {
		if rep.Queues[name] == nil {
			rep.Queues[name] = &QueueReport{}
		}
		return rep.Queues[name]
	}
	var latencies []time.Duration
	for key, s := range d.staged {
		q(s.queue).Staged++
		got := d.received[key]
		switch {
		case s.deliver && len(got) == 0:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s was never delivered", key))
		case !s.deliver && len(got) > 0:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s should have failed but was delivered", key))
		}
		if len(got) == 0 {
			continue
		}
		first := slices.MinFunc(got, func(a, b received) int { return a.at.Compare(b.at) })
		q(s.queue).Delivered++
		q(s.queue).Retried += first.attempt - 1
		rep.Delivered++
		rep.Duplicates += len(got) - 1
		if first.queue != s.queue {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s arrived on %s, staged for %s", key, first.queue, s.queue))
		}
		if first.traceParent == s.traceParent {
			rep.TraceParents++
		} else {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s arrived with traceparent %q, staged with %q", key, first.traceParent, s.traceParent))
		}
		if s.source != "" && (first.source != s.source || first.detailType != s.detailType) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s arrived as source %q detail-type %q, want %q %q", key, first.source, first.detailType, s.source, s.detailType))
		}
		if !s.delayed && first.attempt == 1 {
			latencies = append(latencies, first.at.Sub(s.at))
		}
	}
	for key := range d.received {
		if _, ok := d.staged[key]; !ok {
			rep.Problems = append(rep.Problems, fmt.Sprintf("received %s, which was never staged", key))
		}
	}
	for _, g := range slices.Sorted(maps.Keys(d.groups)) {
		if got := d.firstArrivals(d.groups[g]); !slices.Equal(got, d.groups[g]) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("group %s arrived as %v, staged as %v", g, got, d.groups[g]))
		}
		rep.OrderedGroups++
	}
	for _, sub := range d.subs {
		sr := SubscriberReport{Route: sub.route, Kind: sub.target.Kind.String(), Via: sub.via()}
		for key, s := range d.staged {
			if got := d.received[key]; s.queue == sub.route && len(got) > 0 {
				sr.Delivered++
				if got[0].traceParent == s.traceParent {
					sr.TraceParents++
				}
			}
		}
		if sr.Delivered == 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s (%s) → %s: nothing arrived", sr.Route, sr.Kind, sr.Via))
		}
		rep.Subscribers = append(rep.Subscribers, sr)
	}
	for e := range d.subErrs {
		rep.Problems = append(rep.Problems, e)
	}
	want := map[string]string{keyNoRoute: "no route for queue", keyBroken: ""}
	maxAttempts, _ := strconv.Atoi(DemoParams["MaxAttempts"])
	for _, dl := range dead {
		q(dl.Queue).DeadLettered++
		q(dl.Queue).Retried += dl.Attempt - 1
		rep.DeadLettered++
		reason, expected := want[dl.Key]
		switch {
		case !expected:
			rep.Problems = append(rep.Problems, fmt.Sprintf("unexpected dead letter %s: %s", dl.Key, dl.LastError))
		case !strings.Contains(dl.LastError, reason):
			rep.Problems = append(rep.Problems, fmt.Sprintf("dead letter %s has reason %q", dl.Key, dl.LastError))
		case (dl.Key == keyBroken || dl.Key == keyNoRoute) && dl.Attempt != maxAttempts:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s dead-lettered after %d attempts, want %d", dl.Key, dl.Attempt, maxAttempts))
		}
		delete(want, dl.Key)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s was never dead-lettered", k))
	}
	slices.Sort(rep.Problems)
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		rep.WakeP50 = latencies[(n-1)*50/100]
		rep.WakeP99 = latencies[(n-1)*99/100]
	}
	return rep
}

// newTraceParent is a fresh W3C traceparent: version 00, a random trace
// and parent id, sampled.
func newTraceParent() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand's Read never fails
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-01"
}

// firstArrivals returns the keys that arrived, in the order of their
// first arrival.
func (d *Demo) firstArrivals(keys []string) []string {
	first := map[string]int{}
	var got []string
	for _, k := range keys {
		if r := d.received[k]; len(r) > 0 {
			first[k] = slices.MinFunc(r, func(a, b received) int { return a.n - b.n }).n
			got = append(got, k)
		}
	}
	slices.SortFunc(got, func(a, b string) int { return first[a] - first[b] })
	return got
}

// Print writes the summary table and how to inspect the dead letters:
// with keep (the stack runs on after the demo), the commands, for its
// endpoint and table; without, that the stack stops with the run and how
// to run it with --keep, since commands for its endpoint would find
// nothing there.
func (rep DemoReport) Print(w io.Writer, endpoint, table string, keep bool) {
	fmt.Fprintf(w, "\n%-14s %7s %10s %8s %14s\n", "QUEUE", "STAGED", "DELIVERED", "RETRIED", "DEAD-LETTERED")
	for _, name := range slices.Sorted(maps.Keys(rep.Queues)) {
		q := rep.Queues[name]
		fmt.Fprintf(w, "%-14s %7d %10d %8d %14d\n", name, q.Staged, q.Delivered, q.Retried, q.DeadLettered)
	}
	fmt.Fprintf(w, "%-14s %7d %10d %8s %14d\n", "total", rep.Staged, rep.Delivered, "", rep.DeadLettered)
	fmt.Fprintf(w, "\nwake latency, staged to received: p50 %s, p99 %s\n", rep.WakeP50.Round(time.Millisecond), rep.WakeP99.Round(time.Millisecond))
	fmt.Fprintf(w, "duplicates: %d   elapsed: %s\n", rep.Duplicates, rep.Elapsed.Round(100*time.Millisecond))
	if rep.OrderedGroups > 0 {
		fmt.Fprintf(w, "ordered groups: %d, first arrivals checked against staging order\n", rep.OrderedGroups)
	}
	if len(rep.Subscribers) > 0 {
		fmt.Fprintf(w, "\nthe consumer's queues behind the topic and the bus:\n")
		for _, s := range rep.Subscribers {
			how := "key and traceparent in its message attributes"
			if s.Kind == delivery.KindEventBridge.String() {
				how = "key from detail.outflow.key, traceparent in detail.outflow.traceparent"
			}
			fmt.Fprintf(w, "  %s (%s) → %s: %d delivered, %s: %d/%d\n", s.Route, s.Kind, s.Via, s.Delivered, how, s.TraceParents, s.Delivered)
		}
	}
	fmt.Fprintf(w, "traceparent arrived as staged: %d/%d delivered rows\n", rep.TraceParents, rep.Delivered)
	fmt.Fprintf(w, "effects applied once: %d/%d (consumed with package consume: the effect and its inbox item in one transaction)\n", rep.EffectsOnce, rep.Delivered)
	if parts := slices.Sorted(maps.Keys(rep.Sweeps)); len(parts) > 1 || (len(parts) == 1 && parts[0] != "") {
		var counts []string
		for _, p := range parts {
			counts = append(counts, fmt.Sprintf("%s: %d", p, rep.Sweeps[p]))
		}
		fmt.Fprintf(w, "sweeps by partition: %s\n", strings.Join(counts, ", "))
	}
	if keep {
		fmt.Fprintf(w, "\ninspect the dead letters while it runs, from another shell:\n")
		// As this process was run: go run ./cmd/outflow from the
		// repository root under make run, where outflow need not be on the
		// PATH; the binary itself from a release archive.
		base := fmt.Sprintf("%s --endpoint %s --table %s", Invocation(), endpoint, table)
		fmt.Fprintf(w, "  %s dead list\n  %s dead show %s\n  %s dead redrive --all\n", base, base, keyBroken, base)
	} else {
		again := Invocation() + " local --keep"
		if again == "go run ./cmd/outflow local --keep" {
			again = "make run ARGS=--keep"
		}
		fmt.Fprintf(w, "\nthe stack stops with this run, its dead letters with it: to inspect them (outflow dead list, show, redrive), run %s,\n"+
			"which keeps it running after the demo and prints the commands for its endpoint and table\n", again)
	}
	if rep.OK() {
		fmt.Fprintln(w, "\nOK: every row was delivered or dead-lettered as staged")
		return
	}
	fmt.Fprintln(w, "\nFAILED:")
	for _, p := range rep.Problems {
		fmt.Fprintln(w, "  - "+p)
	}
}
