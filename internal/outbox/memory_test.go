package outbox

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// backlog is an in-memory Store over n rows, all due, laid out in blocks
// of eight: an ordered group of four on a listed route (its index entries
// carry their links in every other group, so the head check reads the
// others' and caches them), two rows of an unordered FIFO group, and two
// plain rows. Row i is in shard i % shards. onQuery runs before each
// query, so a test can look at the run between pages.
type backlog struct {
	n, shards int
	onQuery   func()

	mu    sync.Mutex
	state []Status // "" for pending
}

const (
	backlogOrdered = "ordered.fifo"
	backlogFIFO    = "plain.fifo"
	backlogPlain   = "plain"
)

var backlogEpoch = time.UnixMilli(1_800_000_000_000)

func newBacklog(n, shards int) *backlog {
	return &backlog{n: n, shards: shards, state: make([]Status, n)}
}

func backlogKey(i int) string { return "k" + strconv.Itoa(i) }

// row is row i as staged: its route, group, place and predecessor.
func (b *backlog) row(i int) Row {
	r := Row{Key: backlogKey(i), CreatedAt: backlogEpoch.Add(-time.Hour), DueAt: backlogEpoch}
	block, at := i/8, i%8
	switch {
	case at < 4:
		r.Queue, r.Group, r.Seq = backlogOrdered, "o"+strconv.Itoa(block), int64(at+1)
		if at > 0 {
			r.Prev = backlogKey(i - 1)
		}
	case at < 6:
		r.Queue, r.Group = backlogFIFO, "f"+strconv.Itoa(block)
	default:
		r.Queue = backlogPlain
	}
	return r
}

func (b *backlog) index(key string) int {
	i, err := strconv.Atoi(key[1:])
	if err != nil || i < 0 || i >= b.n {
		return -1
	}
	return i
}

func (b *backlog) Shards() int { return b.shards }

func (b *backlog) QueryDue(_ context.Context, shard int, _ time.Time, after *DueRef, limit int) ([]DueRef, bool, error) {
	if b.onQuery != nil {
		b.onQuery()
	}
	start := shard
	if after != nil {
		start = b.index(after.Key) + b.shards
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var refs []DueRef
	i := start
	for ; i < b.n && len(refs) < limit; i += b.shards {
		if b.state[i] == StatusDone || b.state[i] == StatusFailed {
			continue
		}
		r := b.row(i)
		ref := DueRef{Key: r.Key, Shard: shard, DueAt: r.DueAt, CreatedAt: r.CreatedAt, Queue: r.Queue}
		if r.Queue != backlogOrdered || (i/8)%2 == 0 {
			ref.Prev, ref.Seq, ref.Linked = r.Prev, r.Seq, true
		}
		refs = append(refs, ref)
	}
	return refs, i < b.n, nil
}

func (b *backlog) Claim(_ context.Context, key string, _ time.Time, lease time.Duration, _ int) (Row, error) {
	i := b.index(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 || b.state[i] != "" {
		return Row{}, &ConflictError{Key: key, Op: "claim"}
	}
	b.state[i] = StatusClaimed
	r := b.row(i)
	r.Status, r.Attempt, r.Token, r.LeaseUntil = StatusClaimed, 1, "t", backlogEpoch.Add(lease)
	return r, nil
}

// settle moves a claimed row to status.
func (b *backlog) settle(op string, row Row, status Status) error {
	i := b.index(row.Key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 || b.state[i] != StatusClaimed {
		return &ConflictError{Key: row.Key, Op: op}
	}
	b.state[i] = status
	return nil
}

func (b *backlog) Done(_ context.Context, row Row, _ time.Time) error {
	return b.settle("done", row, StatusDone)
}

func (b *backlog) Retry(_ context.Context, row Row, _ time.Time, _ []AttemptError) error {
	return b.settle("retry", row, "")
}

func (b *backlog) Close(_ context.Context, row Row, _ time.Time, _ []AttemptError) error {
	return b.settle("retry", row, "")
}

func (b *backlog) DeadLetter(_ context.Context, row Row, _ time.Time, _ []AttemptError) error {
	return b.settle("dead-letter", row, StatusFailed)
}

func (b *backlog) Index(_ context.Context, row Row) error {
	return &ConflictError{Key: row.Key, Op: "index"}
}

func (b *backlog) Release(_ context.Context, row Row) error { return b.settle("release", row, "") }

func (b *backlog) Expire(_ context.Context, row Row, _ time.Time, _ int, _ []AttemptError) error {
	return &ConflictError{Key: row.Key, Op: "expire"}
}

func (b *backlog) Quarantine(_ context.Context, key string, _ time.Time, _ string) error {
	return &ConflictError{Key: key, Op: "quarantine"}
}

func (b *backlog) Link(_ context.Context, key string) (Link, error) {
	i := b.index(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 || b.state[i] == StatusDone {
		return Link{}, nil
	}
	r := b.row(i)
	st := b.state[i]
	if st == "" {
		st = StatusPending
	}
	return Link{Found: true, Status: st, Queue: r.Queue, Prev: r.Prev, Seq: r.Seq, DueAt: r.DueAt}, nil
}

// groupSink accepts every row and counts the rows of ordered groups that
// arrive other than right after their predecessor.
type groupSink struct {
	mu         sync.Mutex
	last       map[string]int64
	delivered  int
	outOfOrder int
}

func (s *groupSink) Deliver(_ context.Context, _ string, rows []Row) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		s.delivered++
		if r.Seq == 0 {
			continue
		}
		if r.Seq != s.last[r.Group]+1 {
			s.outOfOrder++
		}
		s.last[r.Group] = r.Seq
	}
	return make([]error, len(rows))
}

// kept is how much a run holds on to: its settled predecessors (less the
// rows parked or ready behind them, which ask for them in the next round),
// holds, cached links, and the entries it will drop once its pages move on.
type kept struct{ settled, held, links, aging int }

func (r *run) kept() kept {
	var k kept
	r.order.mu.Lock()
	k.settled = len(r.order.settled) - len(r.order.ready)
	for _, refs := range r.order.parked {
		k.settled -= len(refs)
	}
	r.order.mu.Unlock()
	k.held = r.held.len()
	r.order.links.Range(func(any, any) bool { k.links++; return true })
	r.ages.mu.Lock()
	k.aging = len(r.ages.queue) - r.ages.head
	r.ages.mu.Unlock()
	return k
}

func (k kept) max(o kept) kept {
	return kept{max(k.settled, o.settled), max(k.held, o.held), max(k.links, o.links), max(k.aging, o.aging)}
}

// A sweep keeps what a later row of the run can still ask for: a settled
// predecessor until its successor is settled or the pages have moved on,
// a hold against a lagging index for the pages that may return it, a link
// for later pages. However many rows it settles, what it holds at any
// page is bounded by its pages: here a backlog thirty times that bound,
// ordered groups, FIFO and plain rows, drains in order within it.
func TestSweep_KeepsPerRowStateForItsRecentPagesNotForEveryRowItSettled(t *testing.T) {
	t.Parallel()
	const shards = 4
	p := DefaultPolicy()
	p.WakeGrace = 0
	p.Concurrency = 4
	p.PageSize = 50
	p.RowBudget = 1 << 30
	p.Ordered = map[string]DeadHead{backlogOrdered: DeadHeadBlock}
	// The rows settled while keepRounds rounds of pages are queried, plus
	// those in flight (a round being read, the refs queued, the claims,
	// batches and settles under way): what a run may keep at once.
	bound := (keepRounds+2)*shards*p.PageSize + p.PageSize + 3*p.Concurrency*sendBatch
	rows := 30 * bound

	store := newBacklog(rows, shards)
	sink := &groupSink{last: map[string]int64{}}
	e, err := New(store, sink, p, WithClock(func() time.Time { return backlogEpoch }))
	require.NoError(t, err)
	r := e.newRun(context.Background(), p.WakeGrace)
	var mu sync.Mutex
	var peak kept
	store.onQuery = func() {
		k := r.kept()
		mu.Lock()
		peak = peak.max(k)
		mu.Unlock()
	}
	all := make([]int, shards)
	for i := range all {
		all[i] = i
	}
	res, err := r.sweep(context.Background(), all)
	require.NoError(t, err)
	require.Equal(t, rows, res.Delivered, "%+v", res)
	require.Equal(t, "drained", res.Stopped)
	require.Zero(t, sink.outOfOrder, "every ordered group in order")
	require.Zero(t, res.Conflicts+res.Errors+res.Waiting, "%+v", res)

	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, peak.held, "the run holds what it settled, for a while")
	require.Positive(t, peak.settled, "and the predecessors a successor may ask for")
	require.Positive(t, peak.links, "and the links it read")
	require.LessOrEqual(t, peak.settled, bound, "settled predecessors grow with the rows: %+v", peak)
	require.LessOrEqual(t, peak.held, bound, "holds grow with the rows: %+v", peak)
	require.LessOrEqual(t, peak.links, bound, "cached links grow with the rows: %+v", peak)
	require.LessOrEqual(t, peak.aging, 3*bound, "entries to drop grow with the rows: %+v", peak)
	end := r.kept()
	require.LessOrEqual(t, end.held+end.settled+end.links, 3*bound, "what the run kept at its end: %+v", end)
}

// A settled predecessor is remembered for its successor alone: the
// successor's settle forgets it, and a row in no ordered group is never
// remembered.
func TestOrder_RemembersASettledRowOnlyUntilItsSuccessorSettles(t *testing.T) {
	t.Parallel()
	o := newOrder()
	a := Row{Key: "a", Seq: 1}
	b := Row{Key: "b", Seq: 2, Prev: "a"}
	plain := Row{Key: "plain"}
	for _, r := range []Row{a, b, plain} {
		o.hold(DueRef{Key: r.Key, Prev: r.Prev, Seq: r.Seq, Linked: true})
	}

	require.True(t, o.settle(a, settledRow{seq: 1}, true), "no successor parked: a ages with the pages")
	parked, settled := o.park(DueRef{Key: "b", Prev: "a", Seq: 2, Linked: true}, false)
	require.False(t, parked)
	require.True(t, settled, "b goes behind a without a read")

	o.settle(b, settledRow{seq: 2}, true)
	require.NotContains(t, o.settled, "a", "a's one successor is settled")
	require.Contains(t, o.settled, "b", "b's successor may still come")

	require.False(t, o.settle(plain, settledRow{}, false))
	require.NotContains(t, o.settled, "plain")
}

// A hold that only spares a refused claim of a lagging index entry goes
// once the run has queried keep more pages; a hold for another worker's
// lease stays until the lease ends.
func TestRun_DropsAHoldForALaggingIndexAfterItsPages(t *testing.T) {
	t.Parallel()
	e, err := New(newBacklog(0, 1), &groupSink{}, DefaultPolicy())
	require.NoError(t, err)
	r := e.newRun(context.Background(), 0)
	r.ages.keep = 2
	now := backlogEpoch
	r.holdRow("settled", settledHold(now))
	r.holdRow("leased", hold{until: now.Add(time.Minute)})

	r.paged()
	_, ok := r.heldFor(DueRef{Key: "settled", CreatedAt: now}, now)
	require.True(t, ok, "one page on, a lagging index may still return it")
	r.paged()
	_, ok = r.heldFor(DueRef{Key: "settled", CreatedAt: now}, now)
	require.False(t, ok, "two pages on, it is dropped")
	_, ok = r.heldFor(DueRef{Key: "leased"}, now)
	require.True(t, ok, "the live index returns a leased row in every pass")

	r.held.dropEnded(now.Add(time.Minute))
	require.Zero(t, r.held.len(), "the lease has ended")
}
