package capacity

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Report is what the capacity model found, as TestCapacityModel writes it
// and cmd/outflow-bench renders it.
type Report struct {
	// Rows is the backlog the drains start from.
	Rows int `json:"rows"`
	// Limits and Lambda echo the modeled figures, in plain units.
	StoreLatencyMs   float64 `json:"store_latency_ms"`
	SendLatencyMs    float64 `json:"send_latency_ms"`
	ShardCeiling     float64 `json:"shard_ceiling"`
	SDKMaxAttempts   int     `json:"sdk_max_attempts"`
	SweepTimeoutS    float64 `json:"sweep_timeout_s"`
	SweepRateS       float64 `json:"sweep_rate_s"`
	DeadlineMarginS  float64 `json:"deadline_margin_s"`
	RowBudget        int     `json:"row_budget"`
	Concurrency      int     `json:"concurrency"`
	PageSize         int     `json:"page_size"`
	WakeBatchSize    int     `json:"wake_batch_size"`
	Headroom         float64 `json:"headroom"`
	SteadySeconds    float64 `json:"steady_seconds"`
	WakeRowsPerS     float64 `json:"wake_rows_per_s"`
	WakeBatchSeconds float64 `json:"wake_batch_seconds"`
	// Drains are the backlog drains, the defaults first (k = 1, 4, 16)
	// then the variations that find what limits them.
	Drains []DrainCase `json:"drains"`
	// Sizing is one line per staging rate.
	Sizing []Sizing `json:"sizing"`
	// RealSeconds is the CPU-bound real time the whole model took.
	RealSeconds float64 `json:"real_seconds"`
}

// DrainCase is a named drain.
type DrainCase struct {
	Name string `json:"name"`
	DrainResult
}

// Sizing is the deployment the model finds for one staging rate.
type Sizing struct {
	Rate float64 `json:"rate"`
	// Shards is the smallest shard count whose busiest index partition
	// stayed within the headroom in the steady run; Formula is
	// ceil(2·rate / (headroom·ceiling)); Tried lists every run of the
	// search.
	Shards  int            `json:"shards"`
	Formula int            `json:"formula"`
	Tried   []SteadyResult `json:"tried"`
	// Partitions, RowBudget and Concurrency are the sweep settings the
	// rules give (see SweepFor), and Backstop the sweep alone draining a
	// minute of staging with them.
	Partitions  int         `json:"partitions"`
	RowBudget   int         `json:"row_budget"`
	Concurrency int         `json:"concurrency"`
	PF          int         `json:"parallelization_factor"`
	Backstop    DrainResult `json:"backstop"`
}

// ShardFormula is the shard count the index ceiling asks for: each row
// costs its shard 2 index write units (stage 1, done 1), so rate rows a
// second spread over the shards must stay within headroom of the ceiling.
func ShardFormula(rate, ceiling, headroom float64) int {
	return max(1, int(math.Ceil(2*rate/(headroom*ceiling))))
}

// StreamShards is the number of stream shards the simulation gives the
// wake: one per table partition the write rate needs (3 table write units
// a row: stage, claim, done; 1,000 per partition), at least 4, what a new
// on-demand table starts with.
func StreamShards(rate float64) int { return max(4, int(math.Ceil(3*rate/1000))) }

// SweepFor gives the sweep settings for a staging rate on shards: enough
// partitions that one period's budgets cover a period of staging (so the
// sweep alone keeps up if the wake stops), at most one per shard, the row
// budget raised when the partitions run out (to a quarter over the even
// share), and a concurrency of at most
// perShard per shard a partition owns, so one sweep's settles stay under
// its shards' ceilings.
func SweepFor(rate float64, shards int, l Lambda, budget, concurrency, perShard int) (k, rowBudget, conc int) {
	perPeriod := rate * l.SweepRate.Seconds()
	k = min(shards, max(1, int(math.Ceil(perPeriod/float64(budget)))))
	// A quarter more than an even share: the hash spreads rows over shards
	// only roughly evenly.
	rowBudget = max(budget, int(math.Ceil(1.25*perPeriod/float64(k)/1000))*1000)
	conc = min(concurrency, perShard*(shards/k))
	return k, rowBudget, max(conc, 1)
}

// Model runs every scenario of the report with the template's defaults: a
// backlog of rows drained by k = 1, 4 and 16 sweep partitions and the
// variations that show their limits, the wake's rate over full batches,
// and, for each staging rate, the smallest shard count by simulation and
// the sweep settings checked by a backstop drain. parallel runs each job
// in a synctest bubble of its own, as many at once as it likes; progress
// reports each step.
func Model(rows int, rates []float64, steady time.Duration, headroom float64,
	parallel func(jobs []func()), progress func(string, ...any)) (Report, error) {
	started := time.Now()
	base := DefaultSetup(1)
	rep := Report{
		Rows: rows, StoreLatencyMs: ms(base.Limits.StoreLatency), SendLatencyMs: ms(base.Limits.SendLatency),
		ShardCeiling: base.Limits.ShardCeiling, SDKMaxAttempts: base.Limits.SDKMaxAttempts,
		SweepTimeoutS: base.Lambda.SweepTimeout.Seconds(), SweepRateS: base.Lambda.SweepRate.Seconds(),
		DeadlineMarginS: base.Policy.DeadlineMargin.Seconds(), RowBudget: base.Policy.RowBudget,
		Concurrency: base.Policy.Concurrency, PageSize: base.Policy.PageSize, WakeBatchSize: base.Lambda.WakeBatchSize,
		Headroom: headroom, SteadySeconds: steady.Seconds(),
	}
	type named struct {
		name string
		s    Setup
	}
	var cases []named
	for _, k := range []int{1, 4, 16} {
		cases = append(cases, named{fmt.Sprintf("k=%d", k), DefaultSetup(k)})
	}
	s := DefaultSetup(16)
	s.Shards = 64
	cases = append(cases, named{"k=16, 64 shards", s})
	s = DefaultSetup(16)
	s.Policy.Concurrency = 4
	cases = append(cases, named{"k=16, concurrency 4", s})
	s = DefaultSetup(16)
	s.Shards, s.Policy.RowBudget = 64, 100000
	cases = append(cases, named{"k=16, 64 shards, budget 100,000", s})
	s = DefaultSetup(16)
	s.Lambda.SweepConcurrency = 4
	cases = append(cases, named{"k=16, sweep concurrency 4", s})
	// Every throttled attempt reaches the engine: its settle retries at
	// work, where the SDK's own retries would hide them.
	s = DefaultSetup(16)
	s.Limits.SDKMaxAttempts = 1
	cases = append(cases, named{"k=16, no SDK retry", s})

	rep.Drains = make([]DrainCase, len(cases))
	rep.Sizing = make([]Sizing, len(rates))
	errs := make([]error, len(cases)+1+len(rates))
	var jobs []func()
	for i, c := range cases {
		jobs = append(jobs, func() {
			progress("drain %s: %d rows, %d partitions over %d shards", c.name, rows, c.s.Partitions, c.s.Shards)
			res, err := Drain(c.s, rows, 10000)
			res.Calls = nil
			rep.Drains[i], errs[i] = DrainCase{Name: c.name, DrainResult: res}, err
		})
	}
	jobs = append(jobs, func() {
		progress("wake: full batches of %d", base.Lambda.WakeBatchSize)
		rep.WakeRowsPerS, rep.WakeBatchSeconds, errs[len(cases)] = WakeBatches(base, base.Lambda.WakeBatchSize, 50)
	})
	for i, rate := range rates {
		jobs = append(jobs, func() {
			rep.Sizing[i], errs[len(cases)+1+i] = size(rate, steady, headroom, progress)
		})
	}
	parallel(jobs)
	rep.RealSeconds = time.Since(started).Seconds()
	return rep, errors.Join(errs...)
}

// size finds the smallest shard count for rate by steady runs, searching
// from the formula's, and checks the sweep settings for it with a
// backstop drain. It must run inside a synctest bubble.
func size(rate float64, steady time.Duration, headroom float64, progress func(string, ...any)) (Sizing, error) {
	base := DefaultSetup(1)
	sz := Sizing{Rate: rate, Formula: ShardFormula(rate, base.Limits.ShardCeiling, headroom)}
	var err error
	fits := map[int]bool{}
	try := func(shards int) bool {
		if ok, seen := fits[shards]; seen {
			return ok
		}
		s := DefaultSetup(1)
		s.Shards = shards
		progress("steady: %.0f rows/s on %d shards", rate, shards)
		var res SteadyResult
		res, err = Steady(s, rate, steady, StreamShards(rate))
		res.Calls = nil
		sz.Tried = append(sz.Tried, res)
		ok := err == nil && res.Throttles == 0 && res.StageThrottles == 0 && float64(res.PeakShardWCU) <= headroom*base.Limits.ShardCeiling
		fits[shards] = ok
		return ok
	}
	n := sz.Formula
	if try(n) {
		for n > 1 && try(n-1) {
			n--
		}
	} else {
		n++
		for err == nil && !try(n) {
			n++
		}
	}
	if err != nil {
		return sz, err
	}
	sz.Shards = n
	sz.Partitions, sz.RowBudget, sz.Concurrency = SweepFor(rate, n, base.Lambda, base.Policy.RowBudget, base.Policy.Concurrency, 4)
	sz.PF = 1
	bs := DefaultSetup(sz.Partitions)
	bs.Shards, bs.Policy.RowBudget, bs.Policy.Concurrency = n, sz.RowBudget, sz.Concurrency
	backlog := int(rate * base.Lambda.SweepRate.Seconds())
	progress("backstop: %d rows, %d partitions over %d shards, budget %d, concurrency %d", backlog, sz.Partitions, n, sz.RowBudget, sz.Concurrency)
	sz.Backstop, err = Drain(bs, backlog, 100)
	sz.Backstop.Calls = nil
	return sz, err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
