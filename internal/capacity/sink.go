package capacity

import (
	"context"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Sink is the simulated SQS standard queue: each SendMessageBatch call
// takes Latency and accepts every message (standard queues have no API
// rate limit, so nothing is throttled). It counts what each row received.
type Sink struct {
	Latency time.Duration

	mu    sync.Mutex
	sends []uint8 // per row index, saturating
	calls int64
	dups  int64
}

// Deliver implements outbox.Deliverer.
func (k *Sink) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	time.Sleep(k.Latency)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	for _, r := range rows {
		i := rowIndex(r.Key)
		if i >= len(k.sends) {
			k.sends = append(k.sends, make([]uint8, i+1-len(k.sends)+1024)...)
		}
		if k.sends[i] > 0 {
			k.dups++
		}
		if k.sends[i] < 255 {
			k.sends[i]++
		}
	}
	return make([]error, len(rows))
}

// Received reports the rows sent at least once, the sends beyond each
// row's first, and the SendMessageBatch calls.
func (k *Sink) Received() (rows, duplicates, calls int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, n := range k.sends {
		if n > 0 {
			rows++
		}
	}
	return rows, k.dups, k.calls
}
