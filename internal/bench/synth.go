// Package bench measures Outflow: an in-memory synthetic store and
// deliverer (with optional latency) for engine overhead, pipelining and
// memory; a naive one-row-at-a-time dispatcher as the baseline; and an SDK
// middleware that counts requests and write units against a real endpoint.
package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// SynthStore is an outbox.Store over n synthetic rows. Its memory is a
// bit per row plus the rows in flight, so a benchmark measures the engine,
// not the store: a pending row is one that is neither done, failed nor
// claimed, due at the common due time unless retried. Every call sleeps
// Latency, outside the lock, like a request's round trip.
type SynthStore struct {
	Latency time.Duration
	// Calls counts store calls, by method name.
	Calls sync.Map

	mu       sync.Mutex
	n        int
	shards   int
	settled  []uint64           // bit per row: done or failed
	claims   map[int]claimState // claimed rows
	attempts map[int]uint8      // pending rows with attempts behind them
	dues     map[int]int64      // rows due other than at due
	due      int64
	queues   []string
	payload  []byte
	tokens   atomic.Uint32
	// groupSize, when set, puts rows in FIFO groups of that many
	// consecutive rows; chained makes each group ordered: a row names the
	// one before it as its predecessor.
	groupSize int
	chained   bool
}

type claimState struct {
	token   uint32
	lease   int64
	attempt uint8
}

// NewSynthStore returns n pending rows, due at due, spread over queues.
func NewSynthStore(n, shards int, queues []string, payloadBytes int, due time.Time) *SynthStore {
	s := &SynthStore{
		n: n, shards: shards, settled: make([]uint64, (n+63)/64), claims: map[int]claimState{},
		attempts: map[int]uint8{}, dues: map[int]int64{}, due: due.UnixMilli(), queues: queues,
		payload: []byte(strings.Repeat("x", payloadBytes)),
	}
	return s
}

// FIFOQueue is the FIFO route of the benchmark rows, the one ordered
// groups are staged on.
const FIFOQueue = "q4.fifo"

// NewGroupSynthStore returns n pending rows on FIFOQueue, due at due, in
// groups of groupSize consecutive rows. With ordered set each group is a
// chain, as the producer stages an ordered route's rows: row i names row
// i−1 of its group as its predecessor, and Link reports it; without, the
// rows carry their group and nothing more, the unordered baseline.
func NewGroupSynthStore(n, shards, groupSize int, ordered bool, payloadBytes int, due time.Time) *SynthStore {
	s := NewSynthStore(n, shards, []string{FIFOQueue}, payloadBytes, due)
	s.groupSize, s.chained = max(groupSize, 1), ordered
	return s
}

// group returns row i's message group, place and predecessor: all empty
// for a store without groups, no predecessor for unchained groups.
func (s *SynthStore) group(i int) (group string, seq int64, prev string) {
	if s.groupSize == 0 {
		return "", 0, ""
	}
	group = "g" + strconv.Itoa(i/s.groupSize)
	if !s.chained {
		return group, 0, ""
	}
	seq = int64(i%s.groupSize) + 1
	if seq > 1 {
		prev = Key(i - 1)
	}
	return group, seq, prev
}

// Key is the key of row i.
func Key(i int) string { return fmt.Sprintf("r%07d", i) }

func index(key string) int {
	i, err := strconv.Atoi(key[1:])
	if err != nil {
		return -1
	}
	return i
}

func (s *SynthStore) call(name string) {
	c, _ := s.Calls.LoadOrStore(name, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	if s.Latency > 0 {
		time.Sleep(s.Latency)
	}
}

// Count returns the calls made to method.
func (s *SynthStore) Count(method string) int64 {
	c, ok := s.Calls.Load(method)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

func (s *SynthStore) isSettled(i int) bool { return s.settled[i/64]&(1<<(i%64)) != 0 }

func (s *SynthStore) settle(i int) { s.settled[i/64] |= 1 << (i % 64) }

func (s *SynthStore) dueAt(i int) int64 {
	if d, ok := s.dues[i]; ok {
		return d
	}
	return s.due
}

// Left counts rows not yet done or failed.
func (s *SynthStore) Left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range s.n {
		if !s.isSettled(i) {
			n++
		}
	}
	return n
}

// Shards implements outbox.Store.
func (s *SynthStore) Shards() int { return s.shards }

// QueryDue implements outbox.Store. Rows are ordered by index, which is
// their due order while nothing is retried.
func (s *SynthStore) QueryDue(_ context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	s.call("QueryDue")
	start := shard
	if after != nil {
		start = index(after.Key) + s.shards
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]outbox.DueRef, 0, min(limit, 1024))
	nowMs := now.UnixMilli()
	i := start
	for ; i < s.n && len(refs) < limit; i += s.shards {
		if !s.isSettled(i) && s.dueAt(i) <= nowMs {
			// The due index projects each row's place in its group.
			_, seq, prev := s.group(i)
			refs = append(refs, outbox.DueRef{Key: Key(i), Shard: shard, DueAt: time.UnixMilli(s.dueAt(i)), Queue: s.queues[i%len(s.queues)],
				Prev: prev, Seq: seq, Linked: true})
		}
	}
	return refs, i < s.n, nil
}

func (s *SynthStore) conflict(op, key string) error { return &outbox.ConflictError{Key: key, Op: op} }

// Claim implements outbox.Store.
func (s *SynthStore) Claim(_ context.Context, key string, now time.Time, lease time.Duration, max int) (outbox.Row, error) {
	s.call("Claim")
	i := index(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	nowMs := now.UnixMilli()
	if i < 0 || i >= s.n || s.isSettled(i) || s.dueAt(i) > nowMs {
		return outbox.Row{}, s.conflict("claim", key)
	}
	attempt := s.attempts[i]
	if c, ok := s.claims[i]; ok {
		if c.lease >= nowMs {
			return outbox.Row{}, s.conflict("claim", key)
		}
		attempt = c.attempt
	}
	if int(attempt) >= max {
		return outbox.Row{}, s.conflict("claim", key)
	}
	c := claimState{token: s.tokens.Add(1), lease: now.Add(lease).UnixMilli(), attempt: attempt + 1}
	s.claims[i] = c
	delete(s.attempts, i)
	group, seq, prev := s.group(i)
	return outbox.Row{
		Key: key, Queue: s.queues[i%len(s.queues)], Payload: s.payload, Status: outbox.StatusClaimed,
		Attempt: int(c.attempt), Token: strconv.FormatUint(uint64(c.token), 10), LeaseUntil: time.UnixMilli(c.lease),
		Group: group, Seq: seq, Prev: prev,
	}, nil
}

// transition applies a token-guarded settle.
func (s *SynthStore) transition(op string, row outbox.Row, apply func(i int, c claimState)) error {
	s.call(op)
	i := index(row.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[i]
	if !ok || strconv.FormatUint(uint64(c.token), 10) != row.Token {
		return s.conflict(op, row.Key)
	}
	delete(s.claims, i)
	apply(i, c)
	return nil
}

// Done implements outbox.Store.
func (s *SynthStore) Done(_ context.Context, row outbox.Row, _ time.Time) error {
	return s.transition("Done", row, func(i int, _ claimState) { s.settle(i) })
}

// Retry implements outbox.Store.
func (s *SynthStore) Retry(_ context.Context, row outbox.Row, due time.Time, _ []outbox.AttemptError) error {
	return s.transition("Retry", row, func(i int, c claimState) { s.attempts[i], s.dues[i] = c.attempt, due.UnixMilli() })
}

// Close implements outbox.Store: a retry with a fresh budget.
func (s *SynthStore) Close(_ context.Context, row outbox.Row, due time.Time, _ []outbox.AttemptError) error {
	return s.transition("Retry", row, func(i int, _ claimState) { s.attempts[i], s.dues[i] = 0, due.UnixMilli() })
}

// DeadLetter implements outbox.Store.
func (s *SynthStore) DeadLetter(_ context.Context, row outbox.Row, _ time.Time, _ []outbox.AttemptError) error {
	return s.transition("DeadLetter", row, func(i int, _ claimState) { s.settle(i) })
}

// Release implements outbox.Store.
func (s *SynthStore) Release(_ context.Context, row outbox.Row) error {
	return s.transition("Release", row, func(i int, c claimState) {
		if c.attempt > 1 {
			s.attempts[i] = c.attempt - 1
		}
	})
}

// Index implements outbox.Store; every synthetic row is in the due index.
func (s *SynthStore) Index(_ context.Context, row outbox.Row) error {
	s.call("Index")
	return s.conflict("index", row.Key)
}

// Expire implements outbox.Store.
func (s *SynthStore) Expire(_ context.Context, row outbox.Row, _ time.Time, _ int, _ []outbox.AttemptError) error {
	s.call("Expire")
	return s.conflict("expire", row.Key)
}

// Quarantine implements outbox.Store.
func (s *SynthStore) Quarantine(_ context.Context, key string, _ time.Time, _ string) error {
	s.call("Quarantine")
	return s.conflict("quarantine", key)
}

// Sink is a deliverer that accepts everything after Latency per call. It
// checks the order of rows that carry a place in an ordered group: each
// must follow the last one of its group it received.
type Sink struct {
	Latency time.Duration
	calls   atomic.Int64
	rows    atomic.Int64

	mu         sync.Mutex
	last       map[string]int64 // group -> seq of its last row received
	outOfOrder int64
}

// Deliver implements outbox.Deliverer.
func (d *Sink) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	d.calls.Add(1)
	d.rows.Add(int64(len(rows)))
	d.checkOrder(rows)
	if d.Latency > 0 {
		time.Sleep(d.Latency)
	}
	return make([]error, len(rows))
}

// checkOrder counts the rows of ordered groups that arrive other than
// right after their group's previous row.
func (d *Sink) checkOrder(rows []outbox.Row) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rows {
		if r.Seq == 0 {
			continue
		}
		if d.last == nil {
			d.last = map[string]int64{}
		}
		if r.Seq != d.last[r.Group]+1 {
			d.outOfOrder++
		}
		d.last[r.Group] = max(d.last[r.Group], r.Seq)
	}
}

// OutOfOrder reports how many rows of ordered groups arrived other than
// right after their predecessor.
func (d *Sink) OutOfOrder() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.outOfOrder
}

// Calls and Rows report what the sink received.
func (d *Sink) Calls() int64 { return d.calls.Load() }

// Rows reports how many rows the sink received.
func (d *Sink) Rows() int64 { return d.rows.Load() }

// Link implements outbox.Store. A row is found until it is settled (a
// delivered row's item is deleted, and a dead letter is settled too: the
// benchmarks deliver everything), with its predecessor if its group is
// ordered.
func (s *SynthStore) Link(_ context.Context, key string) (outbox.Link, error) {
	s.call("Link")
	i := index(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= s.n || s.isSettled(i) {
		return outbox.Link{}, nil
	}
	st, attempt := outbox.StatusPending, s.attempts[i]
	if c, ok := s.claims[i]; ok {
		st, attempt = outbox.StatusClaimed, c.attempt
	}
	_, seq, prev := s.group(i)
	return outbox.Link{Found: true, Status: st, Attempt: int(attempt), Queue: s.queues[i%len(s.queues)], Prev: prev, Seq: seq,
		DueAt: time.UnixMilli(s.dueAt(i))}, nil
}
