package leansoak_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// clock is the soak's virtual clock. Only the soak's own loop moves it,
// and only while no worker runs, so every call of a wake invocation or a
// sweep reads one time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// workerKey tags a context with the worker that sends under it, "wake"
// or "sweep", so the wire can say who sent each copy.
type workerKey struct{}

// sent is one message of a row that reached its queue: a copy of the
// row, or the message closing a dead letter's place in its ordered group.
type sent struct {
	at      time.Time
	by      string
	closing bool
}

// wire records every message SQS accepted, by row key, below the send
// faults: a send reported failed that landed (faults.SendAmbiguous) is
// counted, a send refused before it left is not. It is the soak's ground
// truth for "delivered" and "sent more than once", which the queues'
// own contents confirm at the end.
type wire struct {
	next  delivery.SQSAPI
	clock *clock

	mu    sync.Mutex
	sends map[string][]sent
}

func newWire(next delivery.SQSAPI, clk *clock) *wire {
	return &wire{next: next, clock: clk, sends: map[string][]sent{}}
}

// SendMessageBatch implements delivery.SQSAPI.
func (w *wire) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := w.next.SendMessageBatch(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	keys := make(map[string]string, len(in.Entries))
	closing := make(map[string]bool, len(in.Entries))
	for _, e := range in.Entries {
		keys[aws.ToString(e.Id)] = aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue)
		_, closing[aws.ToString(e.Id)] = e.MessageAttributes[target.AttrClosed]
	}
	by, _ := ctx.Value(workerKey{}).(string)
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ok := range out.Successful {
		id := aws.ToString(ok.Id)
		w.sends[keys[id]] = append(w.sends[keys[id]], sent{at: now, by: by, closing: closing[id]})
	}
	return out, nil
}

// copiesOf returns the copies of key's row that reached its queue, in
// order, leaving out any message closing its place.
func (w *wire) copiesOf(key string) []sent {
	w.mu.Lock()
	defer w.mu.Unlock()
	var copies []sent
	for _, s := range w.sends[key] {
		if !s.closing {
			copies = append(copies, s)
		}
	}
	return copies
}

// invocation is one wake invocation as the crashing deliverer sees it.
type invocation struct {
	// crash makes the invocation die after its first send returns: the
	// copies it sent are on the queue, and nothing more is written.
	crash   bool
	cancel  context.CancelFunc
	crashed atomic.Bool
}

type invocationKey struct{}

// crashing is the wake's deliverer: it crashes an invocation marked to
// crash between send and settle. The send runs to its end (its copies
// land), then the invocation's context is cancelled, which the engine
// takes for a crash: no settle, hand-over or release is written after
// it. A send the engine starts after the crash sends nothing.
type crashing struct{ next outbox.Deliverer }

// Deliver implements outbox.Deliverer.
func (c crashing) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	if inv == nil || !inv.crash {
		return c.next.Deliver(ctx, queue, rows)
	}
	if err := ctx.Err(); err != nil {
		errs := make([]error, len(rows))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	errs := c.next.Deliver(context.WithoutCancel(ctx), queue, rows)
	inv.crashed.Store(true)
	inv.cancel()
	return errs
}
