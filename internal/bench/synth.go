// Package bench measures Outflow: an in-memory synthetic store and
// deliverer (with optional latency) for engine overhead, pipelining and
// memory; a naive one-row-at-a-time dispatcher as the baseline; and an SDK
// middleware that counts requests and write units against a real endpoint.
package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Row states in a SynthStore.
const (
	pending uint8 = iota
	claimed
	done
	failed
)

// SynthStore is an outbox.Store over n synthetic rows held in a few bytes
// each, so a benchmark measures the engine, not the store. Every call
// sleeps Latency, outside the lock, like a request's round trip.
type SynthStore struct {
	Latency time.Duration
	// Calls counts store calls, by method name.
	Calls sync.Map

	mu      sync.Mutex
	shards  int
	status  []uint8
	attempt []uint8
	token   []uint32
	lease   []int64
	due     []int64
	queues  []string
	payload []byte
	tokens  atomic.Uint32
}

// NewSynthStore returns n pending rows, due at due, spread over queues.
func NewSynthStore(n, shards int, queues []string, payloadBytes int, due time.Time) *SynthStore {
	s := &SynthStore{
		shards: shards, status: make([]uint8, n), attempt: make([]uint8, n), token: make([]uint32, n),
		lease: make([]int64, n), due: make([]int64, n), queues: queues, payload: make([]byte, payloadBytes),
	}
	for i := range s.payload {
		s.payload[i] = 'x'
	}
	for i := range s.due {
		s.due[i] = due.UnixMilli()
	}
	return s
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

// Left counts rows not yet done or failed.
func (s *SynthStore) Left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.status {
		if st == pending || st == claimed {
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
	refs := make([]outbox.DueRef, 0, limit)
	nowMs := now.UnixMilli()
	i := start
	for ; i < len(s.status) && len(refs) < limit; i += s.shards {
		if (s.status[i] == pending || s.status[i] == claimed) && s.due[i] <= nowMs {
			refs = append(refs, outbox.DueRef{Key: Key(i), Shard: shard, DueAt: time.UnixMilli(s.due[i])})
		}
	}
	return refs, i < len(s.status), nil
}

func (s *SynthStore) row(i int) outbox.Row {
	return outbox.Row{
		Key: Key(i), Queue: s.queues[i%len(s.queues)], Payload: s.payload, Status: outbox.StatusClaimed,
		Attempt: int(s.attempt[i]), Token: strconv.FormatUint(uint64(s.token[i]), 10), LeaseUntil: time.UnixMilli(s.lease[i]),
	}
}

func (s *SynthStore) conflict(op, key string) error { return &outbox.ConflictError{Key: key, Op: op} }

// Claim implements outbox.Store.
func (s *SynthStore) Claim(_ context.Context, key string, now time.Time, lease time.Duration, max int) (outbox.Row, error) {
	s.call("Claim")
	i := index(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	nowMs := now.UnixMilli()
	if i < 0 || i >= len(s.status) || s.due[i] > nowMs || int(s.attempt[i]) >= max ||
		!(s.status[i] == pending || s.status[i] == claimed && s.lease[i] < nowMs) {
		return outbox.Row{}, s.conflict("claim", key)
	}
	s.status[i], s.attempt[i], s.token[i], s.lease[i] = claimed, s.attempt[i]+1, s.tokens.Add(1), now.Add(lease).UnixMilli()
	return s.row(i), nil
}

// settle applies a token-guarded transition.
func (s *SynthStore) settle(op string, row outbox.Row, apply func(i int)) error {
	s.call(op)
	i := index(row.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.status) || s.status[i] != claimed || strconv.FormatUint(uint64(s.token[i]), 10) != row.Token {
		return s.conflict(op, row.Key)
	}
	apply(i)
	return nil
}

// Done implements outbox.Store.
func (s *SynthStore) Done(_ context.Context, row outbox.Row, _ time.Time) error {
	return s.settle("Done", row, func(i int) { s.status[i] = done })
}

// Retry implements outbox.Store.
func (s *SynthStore) Retry(_ context.Context, row outbox.Row, due time.Time, _ []outbox.AttemptError) error {
	return s.settle("Retry", row, func(i int) { s.status[i], s.due[i] = pending, due.UnixMilli() })
}

// DeadLetter implements outbox.Store.
func (s *SynthStore) DeadLetter(_ context.Context, row outbox.Row, _ time.Time, _ []outbox.AttemptError) error {
	return s.settle("DeadLetter", row, func(i int) { s.status[i] = failed })
}

// Release implements outbox.Store.
func (s *SynthStore) Release(_ context.Context, row outbox.Row) error {
	return s.settle("Release", row, func(i int) { s.status[i], s.attempt[i] = pending, s.attempt[i]-1 })
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

// Sink is a deliverer that accepts everything after Latency per call.
type Sink struct {
	Latency time.Duration
	calls   atomic.Int64
	rows    atomic.Int64
}

// Deliver implements outbox.Deliverer.
func (d *Sink) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	d.calls.Add(1)
	d.rows.Add(int64(len(rows)))
	if d.Latency > 0 {
		time.Sleep(d.Latency)
	}
	return make([]error, len(rows))
}

// Calls and Rows report what the sink received.
func (d *Sink) Calls() int64 { return d.calls.Load() }

// Rows reports how many rows the sink received.
func (d *Sink) Rows() int64 { return d.rows.Load() }
