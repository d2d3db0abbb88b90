package capacity

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Queue is the route every simulated row goes to: a standard queue.
const Queue = "orders"

// Setup is one deployment the scenarios run: its shards, partitions and
// policy, and the service figures.
type Setup struct {
	Shards     int           `json:"shards"`
	Partitions int           `json:"partitions"`
	Policy     outbox.Policy `json:"-"`
	Limits     Limits        `json:"-"`
	Lambda     Lambda        `json:"-"`
}

// Counts are what a scenario's store and sink saw.
type Counts struct {
	Delivered      int64            `json:"delivered"`
	Duplicates     int64            `json:"duplicates"`
	ReClaims       int64            `json:"reclaims"`
	Left           int              `json:"left"`
	Throttles      int64            `json:"throttles"`
	Surfaced       int64            `json:"surfaced"`
	EarlyThrottles int64            `json:"early_throttles"`
	StageThrottles int64            `json:"stage_throttles"`
	PeakShardWCU   int              `json:"peak_shard_wcu"`
	MeanShardWCU   float64          `json:"mean_shard_wcu"`
	SendCalls      int64            `json:"send_calls"`
	Calls          map[string]int64 `json:"calls,omitempty"`
}

func counts(st *Store, sink *Sink, over time.Duration) Counts {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := Counts{Left: st.left, Throttles: st.stats.Throttles, Surfaced: st.stats.Surfaced, EarlyThrottles: st.stats.EarlyThrottles,
		StageThrottles: st.stats.StageThrottles, ReClaims: st.stats.ReClaims, Calls: st.stats.Calls}
	var total int64
	for _, b := range st.buckets {
		c.PeakShardWCU = max(c.PeakShardWCU, b.peakSec)
		total += b.total
	}
	if over > 0 {
		c.MeanShardWCU = float64(total) / float64(len(st.buckets)) / over.Seconds()
	}
	c.Delivered, c.Duplicates, c.SendCalls = sink.Received()
	return c
}

// Rates summarise invocations of one kind.
type Rates struct {
	Invocations int `json:"invocations"`
	// RowsPerS is the median, over invocations that delivered rows, of
	// rows delivered per second of the invocation's run time.
	RowsPerS float64 `json:"rows_per_s"`
	// RowsPerInvocation is the median of rows delivered per invocation
	// that delivered any.
	RowsPerInvocation float64        `json:"rows_per_invocation"`
	PeakConcurrent    int            `json:"peak_concurrent"`
	Stopped           map[string]int `json:"stopped"`
	// ClaimConcurrency is the least claim concurrency any invocation
	// backed off to on throttling (Result.ClaimConcurrency).
	ClaimConcurrency int `json:"claim_concurrency"`
	// Errors sums the invocations' Result.Errors: store calls the engine
	// gave up on.
	Errors int `json:"errors"`
}

func rates(rec *recorder, kind string) Rates {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := Rates{Stopped: map[string]int{}, PeakConcurrent: rec.peak[kind]}
	var perS, rows []float64
	for _, inv := range rec.runs {
		if inv.Kind != kind {
			continue
		}
		r.Invocations++
		r.Stopped[inv.Result.Stopped]++
		r.Errors += inv.Result.Errors
		if c := inv.Result.ClaimConcurrency; c > 0 {
			if r.ClaimConcurrency == 0 || c < r.ClaimConcurrency {
				r.ClaimConcurrency = c
			}
		}
		if d := inv.Result.Delivered; d > 0 && inv.Duration > 0 {
			perS = append(perS, float64(d)/inv.Duration.Seconds())
			rows = append(rows, float64(d))
		}
	}
	r.RowsPerS, r.RowsPerInvocation = median(perS), median(rows)
	return r
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// DrainResult is a backlog drained by the sweep alone.
type DrainResult struct {
	Setup
	RowBudget        int     `json:"row_budget"`
	Concurrency      int     `json:"concurrency"`
	SweepConcurrency int     `json:"sweep_concurrency"`
	Rows             int     `json:"rows"`
	Seconds          float64 `json:"seconds"` // virtual time from the first sweep to the last settle
	Ticks            int     `json:"ticks"`   // schedule periods that started sweeps
	Sweep            Rates   `json:"sweep"`
	Counts
}

// Drain stages rows as a backlog, due already, and runs the sweep schedule
// with the wake off (WakeGrace 0) until every row is settled or maxTicks
// periods have passed. It must run inside a synctest bubble.
func Drain(s Setup, rows, maxTicks int) (DrainResult, error) {
	s.Policy.WakeGrace = 0
	if err := s.validate(); err != nil {
		return DrainResult{}, err
	}
	st, sink := NewStore(s.Limits, s.Shards, Queue), &Sink{Latency: s.Limits.SendLatency}
	t0 := time.Now()
	st.Backlog(rows, t0.Add(-time.Hour), t0.Add(-time.Second))
	st.t0, st.period = t0, s.Lambda.SweepRate
	rec := newRecorder()
	ticks := 0
	schedule(st, sink, s.Policy, s.Lambda, s.Partitions, rec, func() bool {
		if st.Left() == 0 || ticks >= maxTicks {
			return true
		}
		ticks++
		return false
	})
	st.mu.Lock()
	last := st.lastDone
	st.mu.Unlock()
	return DrainResult{
		Setup: s, RowBudget: s.Policy.RowBudget, Concurrency: s.Policy.Concurrency, SweepConcurrency: s.Lambda.SweepConcurrency,
		Rows: rows, Seconds: last.Sub(t0).Seconds(), Ticks: ticks,
		Sweep: rates(rec, "sweep"), Counts: counts(st, sink, last.Sub(t0)),
	}, nil
}

// SteadyResult is a staging rate met by the wake and the sweep together.
type SteadyResult struct {
	Setup
	Rate         float64 `json:"rate"` // rows staged per second
	Seconds      float64 `json:"seconds"`
	StreamShards int     `json:"stream_shards"`
	PF           int     `json:"parallelization_factor"`
	Wake         Rates   `json:"wake"`
	Sweep        Rates   `json:"sweep"`
	// Dropped stream records aged past WakeMaxRecordAge.
	Dropped int64 `json:"dropped"`
	// Backlog is the rows not yet settled when staging stopped.
	Backlog int `json:"backlog"`
	Counts
}

// Steady stages rate rows a second for d, with the wake reading a stream
// of streamShards shards and the sweep on its schedule, then lets both
// finish what is left. It must run inside a synctest bubble.
func Steady(s Setup, rate float64, d time.Duration, streamShards int) (SteadyResult, error) {
	if err := s.validate(); err != nil {
		return SteadyResult{}, err
	}
	st, sink := NewStore(s.Limits, s.Shards, Queue), &Sink{Latency: s.Limits.SendLatency}
	t0 := time.Now()
	rec := newRecorder()
	str := newStream(streamShards)
	var stop atomic.Bool
	var dropped atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		wake(st, sink, s.Policy, s.Lambda, str, rec, &stop, &dropped)
	}()
	var staging atomic.Bool
	staging.Store(true)
	sched := make(chan struct{})
	go func() {
		defer close(sched)
		schedule(st, sink, s.Policy, s.Lambda, s.Partitions, rec, func() bool { return !staging.Load() && st.Left() == 0 || stop.Load() })
	}()
	// Staging in steps of 10 ms, carrying the fractions.
	const step = 10 * time.Millisecond
	owed := 0.0
	for time.Since(t0) < d {
		owed += rate * step.Seconds()
		if n := int(owed); n > 0 {
			owed -= float64(n)
			str.put(st.Stage(n), n, time.Now())
		}
		time.Sleep(step)
	}
	staging.Store(false)
	backlog := st.Left()
	// Let the wake and the sweep finish, within a few sweep periods.
	for end := time.Now().Add(5 * s.Lambda.SweepRate); st.Left() > 0 && time.Now().Before(end); {
		time.Sleep(time.Second)
	}
	stop.Store(true)
	<-done
	<-sched
	return SteadyResult{
		Setup: s, Rate: rate, Seconds: d.Seconds(), StreamShards: streamShards, PF: s.Lambda.WakeParallelizationFactor,
		Wake: rates(rec, "wake"), Sweep: rates(rec, "sweep"), Dropped: dropped.Load(), Backlog: backlog,
		Counts: counts(st, sink, d),
	}, nil
}

func (s Setup) validate() error {
	if err := s.Policy.Validate(); err != nil {
		return err
	}
	if err := (outbox.Partition{Index: 0, Count: s.Partitions}).Validate(s.Shards); err != nil {
		return err
	}
	if s.Lambda.SweepRate <= s.Policy.DeadlineMargin {
		return fmt.Errorf("sweep rate %s must exceed the deadline margin %s", s.Lambda.SweepRate, s.Policy.DeadlineMargin)
	}
	return nil
}

// DefaultSetup is the template's defaults with k partitions over
// max(k, 4) shards.
func DefaultSetup(k int) Setup {
	return Setup{Shards: max(k, 4), Partitions: k, Policy: outbox.DefaultPolicy(), Limits: DefaultLimits(), Lambda: DefaultLambda()}
}
