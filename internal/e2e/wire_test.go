package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow/internal/delivery"
)

// wireLog sits between the soak's send faults and SQS and records every
// entry that reaches the wire: when its call started, when the caller
// stopped waiting, and when SQS answered, on the wall clock and on the
// engines' clock. When a copy reaches the consumer behind its group, the
// group's record tells an Outflow reordering (a successor sent before the
// head was settled) from a late landing (a request SQS answered after
// its caller gave up on it) and from a reordering inside moto's FIFO
// emulation (sent in order, received out of it).
//
// The call runs to SQS's answer even when the caller's context ends (a
// crashed sweep): a request the server has read is processed whether or
// not the client still waits, and the log must see when. A topic's
// PublishBatch is logged the same way (nextSNS): its subscribed queues
// get what it stored.
type wireLog struct {
	next    delivery.SQSAPI
	nextSNS delivery.SNSAPI
	clock   func() time.Time
	start   time.Time
	// inFlight counts the calls not yet answered, their callers gone or
	// not: a queue subscribed while none is gets each message stored
	// before it or none.
	inFlight atomic.Int64

	mu    sync.Mutex
	sends []*wireSend
}

// wireSend is one entry of one SendMessageBatch call.
type wireSend struct {
	key, attempt            string
	started, gaveUp, answer time.Duration // wall clock, from the soak's start; gaveUp 0 if the caller waited
	clockAt, clockAnswer    time.Time
	outcome                 string
}

var (
	_ delivery.SQSAPI = (*wireLog)(nil)
	_ delivery.SNSAPI = (*wireLog)(nil)
)

// wireEntry is what the log reads of a batch entry: its id and the
// row's key and attempt.
type wireEntry struct{ id, key, attempt string }

// wireResult is what the log reads of a batch's answer: the ids stored,
// and those refused with their codes.
type wireResult struct {
	stored  []string
	refused map[string]string
}

// SendMessageBatch implements delivery.SQSAPI.
func (w *wireLog) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var entries []wireEntry
	for _, e := range in.Entries {
		entries = append(entries, wireEntry{aws.ToString(e.Id), aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue), aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue)})
	}
	return logged(ctx, w, entries, func(ctx context.Context) (*sqs.SendMessageBatchOutput, wireResult, error) {
		out, err := w.next.SendMessageBatch(ctx, in, opts...)
		if err != nil {
			return nil, wireResult{}, err
		}
		res := wireResult{refused: map[string]string{}}
		for _, r := range out.Successful {
			res.stored = append(res.stored, aws.ToString(r.Id))
		}
		for _, f := range out.Failed {
			res.refused[aws.ToString(f.Id)] = aws.ToString(f.Code)
		}
		return out, res, nil
	})
}

// PublishBatch implements delivery.SNSAPI.
func (w *wireLog) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	var entries []wireEntry
	for _, e := range in.PublishBatchRequestEntries {
		entries = append(entries, wireEntry{aws.ToString(e.Id), aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue), aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue)})
	}
	return logged(ctx, w, entries, func(ctx context.Context) (*sns.PublishBatchOutput, wireResult, error) {
		out, err := w.nextSNS.PublishBatch(ctx, in, opts...)
		if err != nil {
			return nil, wireResult{}, err
		}
		res := wireResult{refused: map[string]string{}}
		for _, r := range out.Successful {
			res.stored = append(res.stored, aws.ToString(r.Id))
		}
		for _, f := range out.Failed {
			res.refused[aws.ToString(f.Id)] = aws.ToString(f.Code)
		}
		return out, res, nil
	})
}

// logged records a batch call's entries, runs it to its answer whether or
// not its caller still waits, and records the answer.
func logged[Out any](ctx context.Context, w *wireLog, batch []wireEntry, call func(context.Context) (*Out, wireResult, error)) (*Out, error) {
	entries := make(map[string]*wireSend, len(batch))
	started, clockAt := time.Since(w.start), w.clock()
	w.mu.Lock()
	for _, e := range batch {
		s := &wireSend{started: started, clockAt: clockAt, outcome: "no answer", key: e.key, attempt: e.attempt}
		entries[e.id] = s
		w.sends = append(w.sends, s)
	}
	w.mu.Unlock()
	type answer struct {
		out *Out
		err error
	}
	answered := make(chan answer, 1)
	w.inFlight.Add(1)
	go func() {
		defer w.inFlight.Add(-1)
		out, res, err := call(context.WithoutCancel(ctx))
		at, clockAnswer := time.Since(w.start), w.clock()
		w.mu.Lock()
		for _, s := range entries {
			s.answer, s.clockAnswer = at, clockAnswer
			if err != nil {
				s.outcome = "call failed: " + err.Error()
			}
		}
		if err == nil {
			for _, id := range res.stored {
				entries[id].outcome = "stored"
			}
			for id, code := range res.refused {
				entries[id].outcome = "refused: " + code
			}
		}
		w.mu.Unlock()
		answered <- answer{out, err}
	}()
	select {
	case a := <-answered:
		return a.out, a.err
	case <-ctx.Done():
		w.mu.Lock()
		for _, s := range entries {
			s.gaveUp = time.Since(w.start)
		}
		w.mu.Unlock()
		return nil, ctx.Err()
	}
}

// quiet waits until no call is in flight: between rounds no new one
// starts, and one a crashed sweep gave up on is answered within seconds.
func (w *wireLog) quiet(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w.inFlight.Load() == 0 {
			return true
		}
	}
	return false
}

// summary counts the entries sent, and those whose caller gave up before
// SQS or SNS answered (a crashed sweep) that it stored all the same.
func (w *wireLog) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gaveUp, storedLate int
	for _, s := range w.sends {
		if s.gaveUp > 0 {
			gaveUp++
			if s.outcome == "stored" {
				storedLate++
			}
		}
	}
	return fmt.Sprintf("%d entries sent; %d given up by their caller before SQS or SNS answered, %d of them stored", len(w.sends), gaveUp, storedLate)
}

// report lists the sends of the given keys in the order their calls
// started, one line each.
func (w *wireLog) report(keys []string, base time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, s := range w.sends {
		if !slices.Contains(keys, s.key) {
			continue
		}
		gaveUp, answered := "waited", "never answered"
		if s.gaveUp > 0 {
			gaveUp = "gave up at " + s.gaveUp.Round(time.Millisecond).String()
		}
		if s.answer > 0 {
			answered = fmt.Sprintf("answered %s (clock +%s)", s.answer.Round(time.Millisecond), s.clockAnswer.Sub(base).Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "    %s attempt %s: started %s (clock +%s), %s, %s: %s\n",
			s.key, s.attempt, s.started.Round(time.Millisecond), s.clockAt.Sub(base).Round(time.Millisecond), gaveUp, answered, s.outcome)
	}
	return b.String()
}
