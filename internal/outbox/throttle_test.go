package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// throttleStore is an in-memory Store of plain rows on one shard that
// throttles on demand: the next refuse[op] settles of op fail with a
// ThrottledError, and, while noteUntil is ahead, every claim reports a
// throttled attempt its client retried (NoteThrottle) and then applies.
// It records each settle attempt's time, and the claims in flight.
type throttleStore struct {
	claimDelay time.Duration
	noteUntil  time.Time

	mu       sync.Mutex
	keys     []string
	rows     map[string]*Row
	refuse   map[string]int
	attempts map[string][]time.Time
	inflight int
	// peaks is the most claims in flight seen in each second since start.
	start time.Time
	peaks map[int]int
}

func newThrottleStore(n int) *throttleStore {
	s := &throttleStore{rows: map[string]*Row{}, refuse: map[string]int{}, attempts: map[string][]time.Time{}, peaks: map[int]int{}, start: time.Now()}
	for i := range n {
		k := fmt.Sprintf("r%06d", i)
		s.keys = append(s.keys, k)
		s.rows[k] = &Row{Key: k, Queue: "q", Status: StatusPending, CreatedAt: s.start.Add(-time.Hour), DueAt: s.start.Add(-time.Minute)}
	}
	return s
}

func (s *throttleStore) Shards() int { return 1 }

func (s *throttleStore) QueryDue(_ context.Context, _ int, now time.Time, after *DueRef, limit int) ([]DueRef, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []DueRef
	for _, k := range s.keys {
		r := s.rows[k]
		if (after != nil && k <= after.Key) || r.Status != StatusPending || r.DueAt.After(now) {
			continue
		}
		if len(refs) == limit {
			return refs, true, nil
		}
		refs = append(refs, DueRef{Key: k, DueAt: r.DueAt, CreatedAt: r.CreatedAt, Queue: r.Queue})
	}
	return refs, false, nil
}

func (s *throttleStore) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, _ int) (Row, error) {
	s.mu.Lock()
	s.inflight++
	sec := int(time.Since(s.start) / time.Second)
	s.peaks[sec] = max(s.peaks[sec], s.inflight)
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inflight--; s.mu.Unlock() }()
	time.Sleep(s.claimDelay)
	if time.Now().Before(s.noteUntil) {
		NoteThrottle(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[key]
	if r == nil || r.Status != StatusPending {
		return Row{}, &ConflictError{Key: key, Op: "claim"}
	}
	r.Status, r.Attempt, r.Token, r.LeaseUntil = StatusClaimed, r.Attempt+1, fmt.Sprint(r.Attempt+1), now.Add(lease)
	return *r, nil
}

// settle moves a claimed row to status, due at due, or throttles the
// write.
func (s *throttleStore) settle(op string, row Row, status Status, due time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[op] = append(s.attempts[op], time.Now())
	if s.refuse[op] > 0 {
		s.refuse[op]--
		return Throttled(fmt.Errorf("%s %s: ProvisionedThroughputExceededException", op, row.Key))
	}
	r := s.rows[row.Key]
	if r == nil || r.Status != StatusClaimed || r.Token != row.Token {
		return &ConflictError{Key: row.Key, Op: op}
	}
	r.Status = status
	if !due.IsZero() {
		r.DueAt = due
	}
	return nil
}

func (s *throttleStore) Done(_ context.Context, row Row, _ time.Time) error {
	return s.settle("done", row, StatusDone, time.Time{})
}

func (s *throttleStore) Retry(_ context.Context, row Row, due time.Time, _ []AttemptError) error {
	return s.settle("retry", row, StatusPending, due)
}

func (s *throttleStore) Close(_ context.Context, row Row, due time.Time, _ []AttemptError) error {
	return s.settle("retry", row, StatusPending, due)
}

func (s *throttleStore) DeadLetter(_ context.Context, row Row, _ time.Time, _ []AttemptError) error {
	return s.settle("dead-letter", row, StatusFailed, time.Time{})
}

func (s *throttleStore) Release(_ context.Context, row Row) error {
	return s.settle("release", row, StatusPending, time.Time{})
}

func (s *throttleStore) Index(_ context.Context, row Row) error {
	return &ConflictError{Key: row.Key, Op: "index"}
}

func (s *throttleStore) Expire(_ context.Context, row Row, _ time.Time, _ int, _ []AttemptError) error {
	return &ConflictError{Key: row.Key, Op: "expire"}
}

func (s *throttleStore) Quarantine(_ context.Context, key string, _ time.Time, _ string) error {
	return &ConflictError{Key: key, Op: "quarantine"}
}

func (s *throttleStore) Link(context.Context, string) (Link, error) { return Link{}, nil }

func (s *throttleStore) status(key string) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[key].Status
}

// countingSink answers every row with err and counts the sends per key.
type countingSink struct {
	err  error
	mu   sync.Mutex
	sent map[string]int
}

func (c *countingSink) Deliver(_ context.Context, _ string, rows []Row) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := make([]error, len(rows))
	for i, r := range rows {
		c.sent[r.Key]++
		errs[i] = c.err
	}
	return errs
}

func throttlePolicy() Policy {
	p := DefaultPolicy()
	p.WakeGrace = 0
	p.BatchLinger = 5 * time.Millisecond
	p.BackoffBase = time.Minute // a retried row is not due again in the same sweep
	return p
}

// TestSettle_RetriesAThrottledSettleUntilItApplies throttles the first
// three tries of a done, a retry and a dead-letter write: the engine
// tries each again with a growing delay, within the row's lease, until it
// applies, and the row is sent once and counted as settled, not as an
// error.
func TestSettle_RetriesAThrottledSettleUntilItApplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		op      string
		sendErr error
		want    Status
		count   func(Result) int
	}{
		{op: "done", want: StatusDone, count: func(r Result) int { return r.Delivered }},
		{op: "retry", sendErr: errors.New("queue unavailable"), want: StatusPending, count: func(r Result) int { return r.Retried }},
		{op: "dead-letter", sendErr: Permanent(errors.New("no such queue")), want: StatusFailed, count: func(r Result) int { return r.DeadLettered }},
	}
	for _, c := range cases {
		t.Run(c.op, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st := newThrottleStore(1)
				st.refuse[c.op] = 3
				sink := &countingSink{err: c.sendErr, sent: map[string]int{}}
				e, err := New(st, sink, throttlePolicy())
				require.NoError(t, err)
				res, err := e.Sweep(context.Background())
				require.NoError(t, err)
				require.Equal(t, c.want, st.status("r000000"), "the settle applied in the end")
				require.Equal(t, 1, c.count(res))
				require.Equal(t, 1, sink.sent["r000000"], "sent once")
				require.Equal(t, 3, res.Throttled)
				require.Zero(t, res.Errors, "a settle retried until it applied is no error")
				at := st.attempts[c.op]
				require.Len(t, at, 4)
				for i := 1; i < len(at); i++ {
					gap := at[i].Sub(at[i-1])
					require.GreaterOrEqual(t, gap, settleBackoffBase/2, "try %d waited", i+1)
					if i > 1 {
						require.Greater(t, gap, at[i-1].Sub(at[i-2]), "try %d backed off further", i+1)
					}
				}
			})
		})
	}
}

// TestSettle_LeavesAThrottledSettleToTheLeaseOnceItEnds throttles every
// try of a done write: the engine stops trying before the row's lease
// ends (no try starts after it), counts one error, and leaves the row
// claimed for a later sweep.
func TestSettle_LeavesAThrottledSettleToTheLeaseOnceItEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newThrottleStore(1)
		st.refuse["done"] = 1 << 30
		p := throttlePolicy()
		p.Lease = 10 * time.Second
		e, err := New(st, &countingSink{sent: map[string]int{}}, p)
		require.NoError(t, err)
		start := time.Now()
		res, err := e.Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, StatusClaimed, st.status("r000000"))
		require.Equal(t, 1, res.Errors)
		at := st.attempts["done"]
		require.Greater(t, len(at), 3, "tried again while the lease lasted")
		for _, a := range at {
			require.Less(t, a.Sub(start), p.Lease, "no try after the lease")
		}
		require.Equal(t, len(at), res.Throttled)
	})
}

// TestSweep_BacksOffItsClaimsOnThrottlingAndGrowsThemBack runs a sweep
// whose claims report throttled attempts for its first 5 seconds: it
// halves its claims in flight once a second, down to one, then, with the
// throttling over, adds one a second back up to the policy's Concurrency.
func TestSweep_BacksOffItsClaimsOnThrottlingAndGrowsThemBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newThrottleStore(4000)
		st.claimDelay = 100 * time.Millisecond
		st.noteUntil = st.start.Add(5 * time.Second)
		p := throttlePolicy()
		e, err := New(st, &countingSink{sent: map[string]int{}}, p)
		require.NoError(t, err)
		res, err := e.Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, 4000, res.Delivered)
		require.Equal(t, 1, res.ClaimConcurrency, "halved down to one claim at a time")
		require.Equal(t, p.Concurrency, st.peaks[0], "starts at the policy's concurrency")
		require.LessOrEqual(t, st.peaks[4], 1, "one claim at a time after four halvings")
		peak := 0
		for sec, n := range st.peaks {
			if sec >= 5 {
				peak = max(peak, n)
			}
		}
		require.Equal(t, p.Concurrency, peak, "grown back once the throttling stopped")
		require.LessOrEqual(t, st.peaks[7], 4, "grows back one claim a second")
	})
}

// TestClaimGate_HalvesOncePerCooldownAndGrowsByOne drives the gate's
// arithmetic directly.
func TestClaimGate_HalvesOncePerCooldownAndGrowsByOne(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	g := newClaimGate(16, func() time.Time { return now })
	limit := func() float64 { g.mu.Lock(); defer g.mu.Unlock(); g.grow(now); return g.limit }
	g.throttled()
	g.throttled() // the same burst
	require.Equal(t, 8.0, limit())
	now = now.Add(claimGateCooldown)
	g.throttled()
	require.Equal(t, 4.0, limit())
	now = now.Add(3 * claimGateCooldown)
	require.Equal(t, 7.0, limit(), "one more claim per cooldown without a throttle")
	now = now.Add(time.Hour)
	require.Equal(t, 16.0, limit(), "never above the policy's concurrency")
	require.Equal(t, 4, g.low())
	for range 10 {
		now = now.Add(claimGateCooldown)
		g.throttled()
	}
	require.Equal(t, 1.0, limit(), "never below one")
}
