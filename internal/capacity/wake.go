package capacity

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// stream is the simulated DynamoDB stream: one record per staged row, on
// the stream shard of its key, read by one poller per shard.
type stream struct {
	mu     sync.Mutex
	shards [][]record
}

type record struct {
	i  int
	at time.Time
}

func newStream(shards int) *stream { return &stream{shards: make([][]record, shards)} }

func (s *stream) put(first, n int, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := first; i < first+n; i++ {
		sh := 0
		if len(s.shards) > 1 {
			sh = shardNumber(dynamo.ShardOf(Key(i), len(s.shards)))
		}
		s.shards[sh] = append(s.shards[sh], record{i: i, at: at})
	}
}

// take removes up to n records of shard sh, dropping those older than
// maxAge, and returns their keys and how many it dropped.
func (s *stream) take(sh, n int, maxAge time.Duration) (keys []string, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.shards[sh]
	now := time.Now()
	for len(q) > 0 && len(keys) < n {
		r := q[0]
		q = q[1:]
		if now.Sub(r.at) > maxAge {
			dropped++
			continue
		}
		keys = append(keys, Key(r.i))
	}
	s.shards[sh] = q
	return keys, dropped
}

// wake runs one poller per stream shard until stop is set. Like Lambda's
// event source mapping, a poller reads its shard WakePoll apart (four
// times a second), takes up to WakeBatchSize records as one wake
// invocation (Engine.DeliverKeys, within WakeTimeout), with up to
// WakeParallelizationFactor invocations of the shard at once, and reads
// again at once while full batches wait.
func wake(st *Store, sink *Sink, pol outbox.Policy, l Lambda, s *stream, rec *recorder, stop *atomic.Bool, dropped *atomic.Int64) {
	var pollers sync.WaitGroup
	for sh := range s.shards {
		pollers.Go(func() {
			slots := make(chan struct{}, l.WakeParallelizationFactor)
			var runs sync.WaitGroup
			defer runs.Wait()
			for !stop.Load() {
				slots <- struct{}{}
				keys, d := s.take(sh, l.WakeBatchSize, l.WakeMaxRecordAge)
				dropped.Add(int64(d))
				if len(keys) == 0 {
					<-slots
					time.Sleep(l.WakePoll)
					continue
				}
				full := len(keys) == l.WakeBatchSize
				runs.Go(func() {
					defer func() { <-slots }()
					start := rec.begin("wake")
					ctx, cancel := context.WithTimeout(context.Background(), l.WakeTimeout)
					defer cancel()
					res := outbox.Result{Stopped: "refused"}
					if e, err := engineFor(st, sink, pol); err == nil {
						res, _ = e.DeliverKeys(ctx, keys)
					}
					rec.end("wake", sh, start, res)
				})
				if !full {
					time.Sleep(l.WakePoll)
				}
			}
		})
	}
	pollers.Wait()
}

// WakeBatches measures one wake invocation over full batches: batches
// DeliverKeys calls of batch fresh rows each, one after another, on the
// setup's store. It returns rows delivered per second of invocation time
// and the seconds one batch took. It must run inside a synctest bubble.
func WakeBatches(s Setup, batch, batches int) (rowsPerS, seconds float64, err error) {
	if err := s.validate(); err != nil {
		return 0, 0, err
	}
	st, sink := NewStore(s.Limits, s.Shards, Queue), &Sink{Latency: s.Limits.SendLatency}
	var took time.Duration
	delivered := 0
	for range batches {
		first := st.Stage(batch)
		keys := make([]string, batch)
		for i := range keys {
			keys[i] = Key(first + i)
		}
		e, err := engineFor(st, sink, s.Policy)
		if err != nil {
			return 0, 0, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.Lambda.WakeTimeout)
		start := time.Now()
		res, err := e.DeliverKeys(ctx, keys)
		took += time.Since(start)
		cancel()
		if err != nil {
			return 0, 0, err
		}
		delivered += res.Delivered
		// A second apart, as a stream's batches come, so the shards'
		// buckets refill and only the latencies count.
		time.Sleep(time.Second)
	}
	return float64(delivered) / took.Seconds(), took.Seconds() / float64(batches), nil
}
