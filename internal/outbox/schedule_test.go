package outbox_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// schedule runs workers (a round's sweepers and wake) one at a time, and
// switches between them only where one calls the store or the deliverer:
// there the worker waits until every other live worker waits too (at a
// call of its own) or has finished, and then a draw from the seed picks
// which of them goes on. Each worker runs a serial engine (one goroutine,
// see outbox.WithSerial), so what each does, and in what order against the
// others, is a function of the seed and of what the servers answer: a seed
// replays the run, however the Go scheduler runs its goroutines. Switching
// at every call interleaves the workers as finely as their requests do in
// the concurrent soak. A nil schedule runs the workers concurrently.
type schedule struct {
	mu      sync.Mutex
	rng     *rand.Rand
	live    int                   // workers started and not finished
	waiting map[int]chan struct{} // workers waiting at a call, by id
	// switches counts the turns that went to another worker than the
	// one that asked, for the report.
	switches int
	last     int
}

func newSchedule(seed uint64) *schedule {
	return &schedule{rng: rand.New(rand.NewPCG(seed, 0x5c4ed01e)), waiting: map[int]chan struct{}{}, last: -1}
}

// run runs each work on a goroutine of its own under the schedule, the
// work's index as its worker id, and returns when every one has finished.
func (s *schedule) run(works []func()) {
	var wg sync.WaitGroup
	if s == nil {
		for _, work := range works {
			wg.Go(work)
		}
		wg.Wait()
		return
	}
	s.mu.Lock()
	s.live = len(works)
	s.mu.Unlock()
	for id, work := range works {
		wg.Go(func() {
			s.turn(id)
			work()
			s.mu.Lock()
			s.live--
			s.next()
			s.mu.Unlock()
		})
	}
	wg.Wait()
}

// turn waits for worker id's turn.
func (s *schedule) turn(id int) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.waiting[id] = ch
	s.next()
	s.mu.Unlock()
	<-ch
}

// next lets one waiting worker go, the seed's pick, once every live
// worker waits: none is running. The caller holds mu.
func (s *schedule) next() {
	if len(s.waiting) == 0 || len(s.waiting) < s.live {
		return
	}
	ids := slices.Sorted(maps.Keys(s.waiting))
	id := ids[s.rng.IntN(len(ids))]
	if id != s.last {
		s.switches++
	}
	s.last = id
	close(s.waiting[id])
	delete(s.waiting, id)
}

// String reports the turns that changed worker, for the soak report.
func (s *schedule) String() string {
	if s == nil {
		return "none: the workers ran concurrently"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d switches between workers, drawn from the seed", s.switches)
}

// store returns st with worker id waiting for its turn before each call.
func (s *schedule) store(id int, st outbox.Store) outbox.Store {
	if s == nil {
		return st
	}
	return scheduledStore{Store: st, s: s, id: id}
}

// deliverer returns d with worker id waiting for its turn before each
// delivery. A delivery runs whole in one turn: no stall can move the clock
// in the middle of it (see faults.Stalls), and none waits for one.
func (s *schedule) deliverer(id int, d outbox.Deliverer) outbox.Deliverer {
	if s == nil {
		return d
	}
	return scheduledDeliverer{next: d, s: s, id: id}
}

type scheduledDeliverer struct {
	next outbox.Deliverer
	s    *schedule
	id   int
}

func (d scheduledDeliverer) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	d.s.turn(d.id)
	return d.next.Deliver(ctx, queue, rows)
}

type scheduledStore struct {
	outbox.Store
	s  *schedule
	id int
}

func (st scheduledStore) QueryDue(ctx context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	st.s.turn(st.id)
	return st.Store.QueryDue(ctx, shard, now, after, limit)
}

func (st scheduledStore) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	st.s.turn(st.id)
	return st.Store.Claim(ctx, key, now, lease, maxAttempts)
}

func (st scheduledStore) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	st.s.turn(st.id)
	return st.Store.Done(ctx, row, now)
}

func (st scheduledStore) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	st.s.turn(st.id)
	return st.Store.Retry(ctx, row, dueAt, history)
}

func (st scheduledStore) DeadLetter(ctx context.Context, row outbox.Row, now time.Time, history []outbox.AttemptError) error {
	st.s.turn(st.id)
	return st.Store.DeadLetter(ctx, row, now, history)
}

func (st scheduledStore) Release(ctx context.Context, row outbox.Row) error {
	st.s.turn(st.id)
	return st.Store.Release(ctx, row)
}

func (st scheduledStore) Expire(ctx context.Context, row outbox.Row, now time.Time, maxAttempts int, history []outbox.AttemptError) error {
	st.s.turn(st.id)
	return st.Store.Expire(ctx, row, now, maxAttempts, history)
}

func (st scheduledStore) Quarantine(ctx context.Context, key string, now time.Time, reason string) error {
	st.s.turn(st.id)
	return st.Store.Quarantine(ctx, key, now, reason)
}

func (st scheduledStore) Link(ctx context.Context, key string) (outbox.Link, error) {
	st.s.turn(st.id)
	return st.Store.Link(ctx, key)
}

// TestSchedule_ASeedReplaysTheInterleavingOfItsWorkers runs workers that
// record each call they make, pausing for random wall-clock times between
// calls: under one seed the record is the same every run, whatever the
// pauses; another seed interleaves them otherwise.
func TestSchedule_ASeedReplaysTheInterleavingOfItsWorkers(t *testing.T) {
	t.Parallel()
	interleave := func(seed uint64) []string {
		s := newSchedule(seed)
		var mu sync.Mutex
		var got []string
		works := make([]func(), 4)
		for w := range works {
			d := s.deliverer(w, nopDeliverer{})
			works[w] = func() {
				for range 20 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
					d.Deliver(context.Background(), "q", nil)
					mu.Lock()
					got = append(got, strconv.Itoa(w))
					mu.Unlock()
				}
			}
		}
		s.run(works)
		return got
	}
	first := interleave(1)
	require.Len(t, first, 80)
	for range 3 {
		require.Equal(t, first, interleave(1))
	}
	require.NotEqual(t, first, interleave(2))
}
