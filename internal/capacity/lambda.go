package capacity

import (
	"context"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Lambda is what the simulation models of the two functions' runtime.
type Lambda struct {
	// SweepTimeout is the sweep function's timeout (SweepTimeoutSeconds).
	SweepTimeout time.Duration
	// SweepRate is the schedule's period (SweepRate, OUTFLOW_SWEEP_RATE):
	// every partition is started once per period, and a sweep stops
	// claiming where the next one of its partition starts.
	SweepRate time.Duration
	// SweepConcurrency caps the sweep invocations running at once (the
	// reservation, or what the account has left); 0 is no cap. Starts over
	// the cap wait, in order, for a running one to end, as Lambda's async
	// queue holds and retries throttled events.
	SweepConcurrency int
	// WakeTimeout is the wake function's timeout (WakeTimeoutSeconds).
	WakeTimeout time.Duration
	// WakeBatchSize and WakeParallelizationFactor are the stream
	// mapping's (template.yaml): records per invocation, and concurrent
	// invocations per stream shard.
	WakeBatchSize, WakeParallelizationFactor int
	// WakePoll is how long a stream shard's poller waits when it found no
	// record (Lambda polls each shard about four times a second).
	WakePoll time.Duration
	// WakeMaxRecordAge drops records older than this
	// (WakeMaxRecordAgeSeconds); the sweep delivers their rows.
	WakeMaxRecordAge time.Duration
}

// DefaultLambda is the template's defaults.
func DefaultLambda() Lambda {
	return Lambda{
		SweepTimeout: 120 * time.Second, SweepRate: time.Minute,
		WakeTimeout: 30 * time.Second, WakeBatchSize: 100, WakeParallelizationFactor: 1,
		WakePoll: 250 * time.Millisecond, WakeMaxRecordAge: time.Minute,
	}
}

// Invocation is one simulated function run.
type Invocation struct {
	Kind      string        `json:"kind"` // "sweep" or "wake"
	Partition int           `json:"partition"`
	Start     time.Duration `json:"start_ns"` // since the scenario began
	Duration  time.Duration `json:"duration_ns"`
	Result    outbox.Result `json:"-"`
}

// recorder collects invocations from concurrent runs.
type recorder struct {
	mu   sync.Mutex
	t0   time.Time
	runs []Invocation
	// running and peak count concurrent invocations by kind.
	running, peak map[string]int
}

func newRecorder() *recorder {
	return &recorder{t0: time.Now(), running: map[string]int{}, peak: map[string]int{}}
}

func (r *recorder) begin(kind string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[kind]++
	r.peak[kind] = max(r.peak[kind], r.running[kind])
	return time.Now()
}

func (r *recorder) end(kind string, p int, start time.Time, res outbox.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[kind]--
	r.runs = append(r.runs, Invocation{Kind: kind, Partition: p, Start: start.Sub(r.t0), Duration: time.Since(start), Result: res})
}

// engineFor builds the engine one invocation runs: the real engine over a
// client of its own, as each Lambda execution environment has its SDK
// client.
func engineFor(st *Store, sink *Sink, pol outbox.Policy) (*outbox.Engine, error) {
	return outbox.New(st.Client(), sink, pol)
}

// schedule starts every partition of k each SweepRate until done reports
// true, and waits for the invocations it started.
func schedule(st *Store, sink *Sink, pol outbox.Policy, l Lambda, k int, rec *recorder, done func() bool) {
	var slots chan struct{}
	if l.SweepConcurrency > 0 {
		slots = make(chan struct{}, l.SweepConcurrency)
	}
	var wg sync.WaitGroup
	for !done() {
		tick := time.Now()
		for p := range k {
			wg.Go(func() {
				if slots != nil {
					slots <- struct{}{}
					defer func() { <-slots }()
				}
				sweep(st, sink, pol, l, outbox.Partition{Index: p, Count: k}, tick, rec)
			})
		}
		time.Sleep(time.Until(tick.Add(l.SweepRate)))
	}
	wg.Wait()
}

// sweep is one sweep invocation: the function's deadline is its timeout,
// and its claims stop where the next scheduled sweep of its partition
// starts (OUTFLOW_SWEEP_RATE: Engine.SweepPartitions' until), while the
// rows it claimed are still sent up to the deadline.
func sweep(st *Store, sink *Sink, pol outbox.Policy, l Lambda, p outbox.Partition, tick time.Time, rec *recorder) {
	start := rec.begin("sweep")
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(l.SweepTimeout))
	defer cancel()
	res := outbox.Result{Stopped: "refused"}
	if e, err := engineFor(st, sink, pol); err == nil {
		res, _ = e.SweepPartitions(ctx, tick.Add(l.SweepRate), p)
	}
	rec.end("sweep", p.Index, start, res)
}
