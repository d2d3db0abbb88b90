package capacity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Store is the simulated outbox table: rows in memory with the real
// conditional semantics (claim, done, retry, release, dead letter), a due
// index per shard ordered by due time, and a write ceiling per shard. It
// is shared by every simulated invocation; each reaches it through a
// Client, which carries that invocation's SDK retry quota.
type Store struct {
	limits Limits
	queue  string

	mu      sync.Mutex
	rows    []simRow
	index   []shardIndex
	buckets []bucket
	left    int // rows neither done nor failed
	stats   storeStats
	// lastDone is the virtual time of the latest settle.
	lastDone time.Time
	// t0 and period are the schedule's first tick and period, when every
	// sweep starts at a tick (the drains), for EarlyThrottles.
	t0     time.Time
	period time.Duration
}

// simRow is one row's state, kept small: a million of them are held.
type simRow struct {
	due, created, lease int64 // Unix nanoseconds
	token               uint32
	shard               int32
	status              uint8
	attempt             uint8
	claims              uint8 // successful claims, saturating
}

const (
	stPending uint8 = iota
	stClaimed
	stDone
	stFailed
)

// entry is one due-index item; it is stale once its row left the index or
// moved to another due time.
type entry struct {
	due int64
	i   int32
}

func (e entry) less(o entry) bool { return e.due < o.due || e.due == o.due && e.i < o.i }

// shardIndex is one shard's index: entries sorted by (due, row), stale
// ones dropped lazily (head skips them at the front, compaction elsewhere).
type shardIndex struct {
	entries []entry
	head    int
	stale   int
}

// bucket is a shard's token bucket of index write units, with the busiest
// second seen.
type bucket struct {
	tokens  float64
	at      int64 // Unix nanoseconds of the last refill
	second  int64 // the current virtual second
	inSec   int   // units written in it
	peakSec int
	total   int64
}

// storeStats count what the store saw.
type storeStats struct {
	Calls          map[string]int64
	Throttles      int64 // throttled attempts
	Surfaced       int64 // requests that failed after the SDK's retries
	ReClaims       int64 // claims of a row claimed before (a retry, a release or a lapsed lease)
	Staged         int64
	StageThrottles int64
	// EarlyThrottles are the throttled attempts within a sweep's first
	// earlyWindow, when the drains' sweeps (all started at the tick) have
	// not yet backed off: counted when period is set.
	EarlyThrottles int64
}

// earlyWindow is what EarlyThrottles counts: a sweep's first two seconds,
// its start at full claim concurrency and its first backoff.
const earlyWindow = 2 * time.Second

// NewStore returns an empty store over shards due-index shards, its rows
// routed to queue.
func NewStore(l Limits, shards int, queue string) *Store {
	s := &Store{limits: l, queue: queue, index: make([]shardIndex, shards), buckets: make([]bucket, shards)}
	s.stats.Calls = map[string]int64{}
	for i := range s.buckets {
		s.buckets[i].tokens = l.ShardCeiling * l.Burst
	}
	return s
}

// Key is the key of row i.
func Key(i int) string { return "r" + strconv.Itoa(i) }

func rowIndex(key string) int {
	if len(key) < 2 || key[0] != 'r' {
		return -1
	}
	i, err := strconv.Atoi(key[1:])
	if err != nil {
		return -1
	}
	return i
}

// Backlog stages n rows at once, created at created and due at due,
// without charging the index (they were staged before the simulation).
func (s *Store) Backlog(n int, created, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.add(created, due)
	}
}

// Stage stages n rows now, each charged its index write: a staging write
// over its shard's ceiling is counted as a throttle and still applied (the
// producer's SDK would retry it; the simulation keeps the load). It
// returns the first new row's index.
func (s *Store) Stage(n int) (first int) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	first = len(s.rows)
	for range n {
		i := s.add(now, now)
		s.stats.Staged++
		if !s.charge(int(s.rows[i].shard), wcuStage, now, true) {
			s.stats.StageThrottles++
		}
	}
	return first
}

// add appends a pending row and its index entry; the caller holds mu.
func (s *Store) add(created, due time.Time) int {
	i := len(s.rows)
	shard := shardNumber(dynamo.ShardFor(outbox.Row{Key: Key(i), Queue: s.queue}, len(s.index)))
	r := simRow{due: due.UnixNano(), created: created.UnixNano(), shard: int32(shard)}
	s.rows = append(s.rows, r)
	s.insert(shard, entry{due: r.due, i: int32(i)})
	s.left++
	return i
}

func (s *Store) insert(shard int, e entry) {
	x := &s.index[shard]
	n := len(x.entries)
	if n == x.head || !e.less(x.entries[n-1]) {
		x.entries = append(x.entries, e)
		return
	}
	at, _ := slices.BinarySearchFunc(x.entries[x.head:], e, cmpEntry)
	x.entries = slices.Insert(x.entries, x.head+at, e)
}

func cmpEntry(a, b entry) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}

// live reports whether e is its row's current index entry.
func (s *Store) live(e entry) bool {
	r := &s.rows[e.i]
	return (r.status == stPending || r.status == stClaimed) && r.due == e.due
}

// unindex records that row i's entry went stale; the caller holds mu.
func (s *Store) unindex(i int) {
	x := &s.index[s.rows[i].shard]
	x.stale++
	for x.head < len(x.entries) && !s.live(x.entries[x.head]) {
		x.head++
		x.stale--
	}
	if x.stale > 1024 && x.stale > (len(x.entries)-x.head)/2 {
		kept := make([]entry, 0, len(x.entries)-x.head-x.stale)
		for _, e := range x.entries[x.head:] {
			if s.live(e) {
				kept = append(kept, e)
			}
		}
		x.entries, x.head, x.stale = kept, 0, 0
	} else if x.head > 4096 && x.head > len(x.entries)/2 {
		x.entries, x.head = slices.Clone(x.entries[x.head:]), 0
	}
}

// charge takes units from shard's bucket at now. force applies the write
// anyway (the bucket goes into debt); it reports whether they fitted.
func (s *Store) charge(shard, units int, now time.Time, force bool) bool {
	b := &s.buckets[shard]
	t := now.UnixNano()
	if t > b.at {
		b.tokens = min(s.limits.ShardCeiling*s.limits.Burst, b.tokens+float64(t-b.at)/1e9*s.limits.ShardCeiling)
		b.at = t
	}
	fits := b.tokens >= float64(units)
	if !fits && !force {
		return false
	}
	b.tokens -= float64(units)
	if sec := t / int64(time.Second); sec != b.second {
		b.second, b.inSec = sec, 0
	}
	b.inSec += units
	b.peakSec = max(b.peakSec, b.inSec)
	b.total += int64(units)
	return fits
}

// Left is the number of rows neither done nor failed.
func (s *Store) Left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left
}

// ErrThrottled is the error a request surfaces when its shard's index
// stayed over the ceiling through every attempt the SDK made.
var ErrThrottled = errors.New("ThrottlingException: the due index shard's write ceiling is exceeded")

// errQuota is the error of a throttled request the SDK would not retry:
// its client's retry quota is spent.
var errQuota = errors.New("retry quota exceeded")

// Client is one invocation's view of the store: the SDK client of that
// Lambda execution environment, with its own retry quota.
type Client struct {
	*Store
	qmu    sync.Mutex
	tokens int
}

// Client returns a client with a full retry quota.
func (s *Store) Client() *Client { return &Client{Store: s, tokens: s.limits.SDKRetryTokens} }

// write runs one conditional write the way the SDK sends it: each attempt
// pays the latency (a plain sleep: a request in flight finishes, and the
// engine's deadline margin covers it); check decides under the lock whether the condition
// holds (an error refuses the write, costing no index units); a write that
// holds and does not fit its shard's bucket is throttled and retried with
// the SDK's backoff while attempts and quota last.
func (c *Client) write(ctx context.Context, op string, i int, units int, check func(r *simRow, now time.Time) error, apply func(r *simRow, now time.Time)) error {
	for attempt := 1; ; attempt++ {
		time.Sleep(c.limits.StoreLatency)
		throttled, err := c.try(op, i, units, check, apply)
		if !throttled {
			refund := 1
			if attempt > 1 {
				refund = c.limits.SDKThrottleCost
			}
			c.qmu.Lock()
			c.tokens = min(c.limits.SDKRetryTokens, c.tokens+refund)
			c.qmu.Unlock()
			return err
		}
		c.qmu.Lock()
		retry := attempt < c.limits.SDKMaxAttempts && c.tokens >= c.limits.SDKThrottleCost
		if retry {
			c.tokens -= c.limits.SDKThrottleCost
		}
		c.qmu.Unlock()
		// The adapter's per-attempt signal (dynamo's SDK middleware).
		outbox.NoteThrottle(ctx)
		if !retry {
			c.mu.Lock()
			c.stats.Surfaced++
			c.mu.Unlock()
			if attempt < c.limits.SDKMaxAttempts {
				return outbox.Throttled(fmt.Errorf("%s %s: %w: %w", op, Key(i), errQuota, ErrThrottled))
			}
			return outbox.Throttled(fmt.Errorf("%s %s: %w", op, Key(i), ErrThrottled))
		}
		if err := c.sleep(ctx, c.limits.backoff(attempt)); err != nil {
			return err
		}
	}
}

// try is one attempt of write: it reports whether the write was
// throttled, or the refusal of its condition.
func (c *Client) try(op string, i, units int, check func(*simRow, time.Time) error, apply func(*simRow, time.Time)) (throttled bool, err error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Calls[op]++
	if i < 0 || i >= len(c.rows) {
		return false, &outbox.ConflictError{Key: Key(i), Op: op}
	}
	r := &c.rows[i]
	if err := check(r, now); err != nil {
		return false, err
	}
	if units > 0 && !c.charge(int(r.shard), units, now, false) {
		c.stats.Throttles++
		if c.period > 0 && now.Sub(c.t0)%c.period < earlyWindow {
			c.stats.EarlyThrottles++
		}
		return true, nil
	}
	apply(r, now)
	return false, nil
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shards implements outbox.Store.
func (c *Client) Shards() int { return len(c.index) }

// QueryDue implements outbox.Store: a page of a shard's live entries due
// by now, after the given one. Reads are not throttled (a shard's read
// ceiling, 3,000 units, is far above what a page of small projections
// costs at these rates).
func (c *Client) QueryDue(_ context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	time.Sleep(c.limits.StoreLatency)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Calls["QueryDue"]++
	x := &c.index[shard]
	from := x.head
	if after != nil {
		at, found := slices.BinarySearchFunc(x.entries[x.head:], entry{due: after.DueAt.UnixNano(), i: int32(rowIndex(after.Key))}, cmpEntry)
		from = x.head + at
		if found {
			from++
		}
	}
	nowNs := now.UnixNano()
	refs := make([]outbox.DueRef, 0, limit)
	j := from
	for ; j < len(x.entries) && len(refs) < limit; j++ {
		e := x.entries[j]
		if e.due > nowNs {
			return refs, false, nil
		}
		if !c.live(e) {
			continue
		}
		r := &c.rows[e.i]
		refs = append(refs, outbox.DueRef{Key: Key(int(e.i)), Shard: shard, DueAt: time.Unix(0, e.due), CreatedAt: time.Unix(0, r.created), Queue: c.queue, Linked: true})
	}
	return refs, j < len(x.entries), nil
}

func conflict(op string, i int, r *simRow) error {
	cur := outbox.Row{Key: Key(i), Attempt: int(r.attempt), LeaseUntil: time.Unix(0, r.lease), DueAt: time.Unix(0, r.due)}
	switch r.status {
	case stPending:
		cur.Status = outbox.StatusPending
	case stClaimed:
		cur.Status = outbox.StatusClaimed
	case stDone:
		cur.Status = outbox.StatusDone
	default:
		cur.Status = outbox.StatusFailed
	}
	return &outbox.ConflictError{Key: Key(i), Op: op, Current: &cur}
}

// Claim implements outbox.Store.
func (c *Client) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	i := rowIndex(key)
	var out outbox.Row
	err := c.write(ctx, "Claim", i, wcuClaim, func(r *simRow, _ time.Time) error {
		n := now.UnixNano()
		ok := r.due <= n && int(r.attempt) < maxAttempts &&
			(r.status == stPending || r.status == stClaimed && r.lease < n)
		if !ok {
			return conflict("claim", i, r)
		}
		return nil
	}, func(r *simRow, _ time.Time) {
		r.status, r.attempt, r.lease = stClaimed, r.attempt+1, now.Add(lease).UnixNano()
		r.token++
		if r.claims > 0 {
			c.stats.ReClaims++
		}
		r.claims = min(r.claims+1, 255)
		out = outbox.Row{Key: key, Queue: c.queue, Status: outbox.StatusClaimed, Attempt: int(r.attempt),
			Token: strconv.FormatUint(uint64(r.token), 10), LeaseUntil: time.Unix(0, r.lease),
			CreatedAt: time.Unix(0, r.created), DueAt: time.Unix(0, r.due)}
	})
	return out, err
}

// settleWrite is a token-guarded transition of a claimed row.
func (c *Client) settleWrite(ctx context.Context, op string, row outbox.Row, units int, apply func(i int, r *simRow, now time.Time)) error {
	i := rowIndex(row.Key)
	return c.write(ctx, op, i, units, func(r *simRow, _ time.Time) error {
		if r.status != stClaimed || strconv.FormatUint(uint64(r.token), 10) != row.Token {
			return conflict(op, i, r)
		}
		return nil
	}, func(r *simRow, now time.Time) { apply(i, r, now) })
}

// settled ends row i; the caller holds mu.
func (c *Client) settled(i int, r *simRow, status uint8, now time.Time) {
	r.status = status
	c.left--
	c.lastDone = now
	c.unindex(i)
}

// Done implements outbox.Store: the item is deleted, and its index entry.
func (c *Client) Done(ctx context.Context, row outbox.Row, _ time.Time) error {
	return c.settleWrite(ctx, "Done", row, wcuDone, func(i int, r *simRow, now time.Time) { c.settled(i, r, stDone, now) })
}

// Retry implements outbox.Store: the entry moves to the new due time.
func (c *Client) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, _ []outbox.AttemptError) error {
	return c.settleWrite(ctx, "Retry", row, wcuRetry, func(i int, r *simRow, _ time.Time) {
		r.status, r.due = stPending, dueAt.UnixNano()
		c.unindex(i) // the old entry is stale now
		c.insert(int(r.shard), entry{due: r.due, i: int32(i)})
	})
}

// Close implements outbox.Store: a retry with a fresh budget.
func (c *Client) Close(ctx context.Context, row outbox.Row, dueAt time.Time, _ []outbox.AttemptError) error {
	return c.settleWrite(ctx, "Retry", row, wcuRetry, func(i int, r *simRow, _ time.Time) {
		r.status, r.due, r.attempt = stPending, dueAt.UnixNano(), 0
		c.unindex(i)
		c.insert(int(r.shard), entry{due: r.due, i: int32(i)})
	})
}

// DeadLetter implements outbox.Store.
func (c *Client) DeadLetter(ctx context.Context, row outbox.Row, _ time.Time, _ []outbox.AttemptError) error {
	return c.settleWrite(ctx, "DeadLetter", row, wcuDead, func(i int, r *simRow, now time.Time) { c.settled(i, r, stFailed, now) })
}

// Release implements outbox.Store: the attempt is given back.
func (c *Client) Release(ctx context.Context, row outbox.Row) error {
	return c.settleWrite(ctx, "Release", row, 0, func(_ int, r *simRow, _ time.Time) {
		r.status = stPending
		r.attempt--
	})
}

// Index implements outbox.Store; every simulated row is in the due
// index, so there is never one to put there.
func (c *Client) Index(_ context.Context, row outbox.Row) error {
	return &outbox.ConflictError{Key: row.Key, Op: "index"}
}

// Expire implements outbox.Store.
func (c *Client) Expire(ctx context.Context, row outbox.Row, _ time.Time, maxAttempts int, _ []outbox.AttemptError) error {
	i := rowIndex(row.Key)
	return c.write(ctx, "Expire", i, wcuDead, func(r *simRow, now time.Time) error {
		if int(r.attempt) < maxAttempts || r.status == stDone || r.status == stFailed || r.status == stClaimed && r.lease >= now.UnixNano() {
			return conflict("expire", i, r)
		}
		return nil
	}, func(r *simRow, now time.Time) { c.settled(i, r, stFailed, now) })
}

// Quarantine implements outbox.Store; every simulated item is readable.
func (c *Client) Quarantine(_ context.Context, key string, _ time.Time, _ string) error {
	return &outbox.ConflictError{Key: key, Op: "quarantine"}
}

// Link implements outbox.Store; the simulated rows are unordered.
func (c *Client) Link(ctx context.Context, key string) (outbox.Link, error) {
	if err := c.sleep(ctx, c.limits.StoreLatency); err != nil {
		return outbox.Link{}, err
	}
	return outbox.Link{}, nil
}

// shardNumber reads a shard as dynamo.ShardOf writes it.
func shardNumber(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
