package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
// not the client still waits, and the log must see when.
type wireLog struct {
	next  delivery.SQSAPI
	clock func() time.Time
	start time.Time

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

var _ delivery.SQSAPI = (*wireLog)(nil)

// SendMessageBatch implements delivery.SQSAPI.
func (w *wireLog) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	entries := make(map[string]*wireSend, len(in.Entries))
	started, clockAt := time.Since(w.start), w.clock()
	w.mu.Lock()
	for _, e := range in.Entries {
		s := &wireSend{started: started, clockAt: clockAt, outcome: "no answer",
			key: aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue), attempt: aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue)}
		entries[aws.ToString(e.Id)] = s
		w.sends = append(w.sends, s)
	}
	w.mu.Unlock()
	type answer struct {
		out *sqs.SendMessageBatchOutput
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		out, err := w.next.SendMessageBatch(context.WithoutCancel(ctx), in, opts...)
		at, clockAnswer := time.Since(w.start), w.clock()
		w.mu.Lock()
		for _, s := range entries {
			s.answer, s.clockAnswer = at, clockAnswer
			if err != nil {
				s.outcome = "call failed: " + err.Error()
			}
		}
		if err == nil {
			for _, r := range out.Successful {
				entries[aws.ToString(r.Id)].outcome = "stored"
			}
			for _, f := range out.Failed {
				entries[aws.ToString(f.Id)].outcome = "refused: " + aws.ToString(f.Code)
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

// summary counts the entries sent, and those whose caller gave up before
// SQS answered (a crashed sweep) that SQS stored all the same.
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
	return fmt.Sprintf("%d entries sent; %d given up by their caller before SQS answered, %d of them stored", len(w.sends), gaveUp, storedLate)
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
