package bench

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Queues are the four queues benchmark rows are spread over.
var Queues = []string{"q1", "q2", "q3", "q4.fifo"}

// PayloadBytes is the payload size of benchmark rows.
const PayloadBytes = 200

var epoch = time.UnixMilli(1_800_000_000_000)

func policy(concurrency int) outbox.Policy {
	p := outbox.DefaultPolicy()
	p.WakeGrace = 0
	p.Concurrency = concurrency
	p.RowBudget = 1 << 30
	p.PageSize = 1000
	return p
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Overhead is the engine's own cost per row, with zero-latency fakes.
type Overhead struct {
	NsPerRow     float64 // wall time
	CPUNsPerRow  float64 // user+system CPU time
	AllocsPerRow float64
	BytesPerRow  float64
}

// overhead runs f (which processes rows rows) b.N times and reports per-row
// figures as benchmark metrics.
func overhead(b *testing.B, rows int, setup func() func()) {
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	var cpu time.Duration
	var n int
	for b.Loop() {
		b.StopTimer()
		run := setup()
		runtime.ReadMemStats(&ms0)
		c0 := cpuTime()
		b.StartTimer()
		run()
		b.StopTimer()
		cpu += cpuTime() - c0
		runtime.ReadMemStats(&ms1)
		b.StartTimer()
		n++
		b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(rows), "allocs/row")
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(rows), "B/row")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*rows), "ns/row")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n*rows), "cpu-ns/row")
}

// SweepOverhead benchmarks one sweep of rows rows through the engine.
func SweepOverhead(rows int) func(*testing.B) {
	return engineOverhead(rows, (*outbox.Engine).Sweep)
}

// WakeOverhead benchmarks the wake's path over rows named keys.
func WakeOverhead(rows int) func(*testing.B) {
	keys := make([]string, rows)
	for i := range keys {
		keys[i] = Key(i)
	}
	return engineOverhead(rows, func(e *outbox.Engine, ctx context.Context) (outbox.Result, error) {
		return e.DeliverKeys(ctx, keys)
	})
}

// engineOverhead benchmarks path over a fresh store of rows rows, with
// zero-latency fakes, and checks that it delivers every row.
func engineOverhead(rows int, path func(*outbox.Engine, context.Context) (outbox.Result, error)) func(*testing.B) {
	return func(b *testing.B) {
		overhead(b, rows, func() func() {
			e, err := outbox.New(NewSynthStore(rows, 4, Queues, PayloadBytes, epoch), &Sink{}, policy(16),
				outbox.WithClock(func() time.Time { return epoch }))
			if err != nil {
				b.Fatal(err)
			}
			return func() {
				if res, err := path(e, context.Background()); err != nil || res.Delivered != rows {
					b.Fatalf("delivered %d of %d: %v", res.Delivered, rows, err)
				}
			}
		})
	}
}

// Throughput is a rows-per-second measurement.
type Throughput struct {
	Rows     int
	Elapsed  time.Duration
	RowsPerS float64
}

func measure(rows int, f func() int) Throughput {
	start := time.Now()
	got := f()
	el := time.Since(start)
	return Throughput{Rows: got, Elapsed: el, RowsPerS: float64(got) / el.Seconds()}
}

// PipelinedSweep drains rows through one sweep with the given latencies.
func PipelinedSweep(rows, concurrency int, storeLat, sendLat time.Duration) Throughput {
	store := NewSynthStore(rows, 4, Queues, PayloadBytes, epoch)
	store.Latency = storeLat
	e, err := outbox.New(store, &Sink{Latency: sendLat}, policy(concurrency), outbox.WithClock(func() time.Time { return epoch }))
	if err != nil {
		panic(err)
	}
	return measure(rows, func() int {
		res, _ := e.Sweep(context.Background())
		return res.Delivered
	})
}

// NaiveSweep drains rows one at a time with the given latencies.
func NaiveSweep(rows int, storeLat, sendLat time.Duration) Throughput {
	store := NewSynthStore(rows, 4, Queues, PayloadBytes, epoch)
	store.Latency = storeLat
	return measure(rows, func() int {
		n, _ := Naive(context.Background(), store, &Sink{Latency: sendLat}, func() time.Time { return epoch }, time.Minute, 8, 1000)
		return n
	})
}

// IdealBound is the best rows/s a pipeline of the given concurrency can
// reach with these latencies: every row costs one claim and one settle on
// the store, each of Concurrency workers holding one request at a time,
// and a send per 10 rows. Claims and settles run in separate worker pools,
// so the bound is the slower of the two stages.
func IdealBound(concurrency int, storeLat, sendLat time.Duration) float64 {
	claims := float64(concurrency) / storeLat.Seconds()
	// A sender sends 10 rows, then settles them in parallel.
	sends := float64(concurrency) * 10 / (sendLat + storeLat).Seconds()
	return min(claims, sends)
}

// Memory is the peak heap and RSS while sweeping a backlog.
type Memory struct {
	Rows      int
	PeakHeap  uint64
	PeakRSS   uint64
	StoreSize uint64 // bytes the synthetic store itself holds at rest
}

// SweepMemory sweeps a rows-row backlog in pages, sampling the heap, and
// reads the process's peak RSS. Run it in a fresh process per size.
func SweepMemory(rows int) Memory {
	store := NewSynthStore(rows, 4, Queues, PayloadBytes, epoch)
	e, err := outbox.New(store, &Sink{}, policy(16), outbox.WithClock(func() time.Time { return epoch }))
	if err != nil {
		panic(err)
	}
	runtime.GC()
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var max uint64
		var ms runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			max = maxU(max, ms.HeapInuse)
			select {
			case <-stop:
				peak <- max
				return
			case <-t.C:
			}
		}
	}()
	if res, _ := e.Sweep(context.Background()); res.Delivered != rows {
		panic("sweep did not deliver every row")
	}
	close(stop)
	return Memory{Rows: rows, PeakHeap: <-peak, PeakRSS: peakRSS(), StoreSize: uint64(rows+7) / 8}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// GroupRun is one sweep over rows in FIFO groups, ordered or not, against
// the latency fakes.
type GroupRun struct {
	Throughput
	// Groups is how many groups the rows were in.
	Groups int
	// Calls counts the store's calls by method, and Sends the sink's.
	Calls map[string]int64
	Sends int64
	// OutOfOrder counts rows of ordered groups the sink received other
	// than right after their predecessor; it must be 0.
	OutOfOrder int64
}

// PerRow returns the store calls of method per row delivered.
func (g GroupRun) PerRow(method string) float64 {
	if g.Rows == 0 {
		return 0
	}
	return float64(g.Calls[method]) / float64(g.Rows)
}

// GroupSweep drains rows on FIFOQueue, in groups of groupSize consecutive
// rows, through one sweep with the given latencies and claim concurrency.
// With ordered set the groups are chains and the route is listed as
// ordered (dead heads block), so a row goes only once its predecessor is
// settled; without, the same rows go with no order, the baseline.
func GroupSweep(rows, groupSize int, ordered bool, concurrency, pageSize int, storeLat, sendLat time.Duration) (GroupRun, error) {
	store := NewGroupSynthStore(rows, 4, groupSize, ordered, PayloadBytes, epoch)
	store.Latency = storeLat
	sink := &Sink{Latency: sendLat}
	pol := policy(concurrency)
	pol.PageSize = pageSize
	if ordered {
		pol.Ordered = map[string]outbox.DeadHead{FIFOQueue: outbox.DeadHeadBlock}
	}
	e, err := outbox.New(store, sink, pol, outbox.WithClock(func() time.Time { return epoch }))
	if err != nil {
		return GroupRun{}, fmt.Errorf("group sweep: %w", err)
	}
	var res outbox.Result
	t := measure(rows, func() int {
		res, _ = e.Sweep(context.Background())
		return res.Delivered
	})
	run := GroupRun{Throughput: t, Groups: (rows + groupSize - 1) / groupSize, Calls: map[string]int64{}, Sends: sink.Calls(), OutOfOrder: sink.OutOfOrder()}
	for _, m := range []string{"QueryDue", "Claim", "Done", "Link", "Retry", "Release", "DeadLetter"} {
		run.Calls[m] = store.Count(m)
	}
	if t.Rows != rows {
		return run, fmt.Errorf("group sweep of %d rows in groups of %d (ordered %t) delivered %d (stopped: %s)", rows, groupSize, ordered, t.Rows, res.Stopped)
	}
	return run, nil
}
