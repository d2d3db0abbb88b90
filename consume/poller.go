package consume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// PollAPI is the part of the SQS client a Poller uses.
type PollAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Poller consumes a queue from a long-running process (a container): it
// long-polls, applies each batch's groups concurrently and each group's
// messages one at a time in order, keeps the batch's messages invisible
// while they are applied, and deletes the applied ones in one request.
// A message that fails is left to be received again once its visibility
// timeout lapses, which spaces out its retries. On a FIFO queue the
// later messages of its group in the batch are not applied: they are
// made visible again at once, and SQS gives them only after it.
type Poller struct {
	// API is the SQS client.
	API PollAPI
	// QueueURL is the queue's URL.
	QueueURL string
	// Apply applies one message, as Handler's does: nil, ErrDuplicate and
	// ErrLate count as done.
	Apply func(ctx context.Context, m Message) error
	// Closed is given the messages that close a place (Message.Closed),
	// as Handler's is: an Inbox's Close, or AckClosed for a consumer that
	// keeps no order. Nil leaves such a message unacknowledged, reported
	// to OnFailure with ErrNoClosedHook, logged at ERROR and counted, as
	// Handler's does.
	Closed func(ctx context.Context, m Message) error
	// Concurrency bounds the groups applied at once (standard queue: the
	// messages); 0 means 4.
	Concurrency int
	// Visibility is the visibility timeout asked for each message
	// received, renewed every third of it while the message's batch is
	// applied, in whole seconds as SQS takes it (a part of a second rounds
	// up); 0 means 30 seconds.
	Visibility time.Duration
	// Wait is the long poll's wait, in whole seconds as SQS takes it (a
	// part of a second rounds up, so a long poll never turns into a short
	// one); 0 means 20 seconds, SQS's most.
	Wait time.Duration
	// OnFailure, if set, is told of each message not applied, and of
	// failed SQS calls (messageID empty), one call at a time.
	OnFailure func(ctx context.Context, messageID string, err error)
	// OnResult, if set, hears what became of each message received
	// (applied, closed, duplicate, late, gap, failed, skipped), one call
	// at a time though groups are applied concurrently; a Counts's Add is
	// one.
	OnResult func(ctx context.Context, r Result)
	// Logger and Metrics are as Handler's: where a closing message that
	// met no Closed hook is logged (nil: slog.Default()) and counted (nil:
	// os.Stdout). A Poller writes no per-batch line: a container's
	// consumer counts with OnResult.
	Logger  *slog.Logger
	Metrics io.Writer

	hooks sync.Mutex // serializes OnResult, OnFailure and the Logger and Metrics lines
}

// Run polls until ctx ends, then finishes the messages it has started,
// deletes those applied, and returns nil. Messages received but not
// started are made visible again at once, for this or another consumer
// to take, those of a long poll in flight at the end too (see receive).
func (p *Poller) Run(ctx context.Context) error {
	if p.API == nil || p.QueueURL == "" || p.Apply == nil {
		return errors.New("poller: API, QueueURL and Apply are required")
	}
	if p.Visibility > maxVisibility {
		// SQS would refuse every receive, and the loop would only log it.
		return fmt.Errorf("poller: Visibility %s is over SQS's most, %s", p.Visibility, maxVisibility)
	}
	failures := 0
	for ctx.Err() == nil {
		out, err := p.receive(ctx)
		if out == nil && err == nil {
			break // abandoned at shutdown
		}
		if err != nil {
			p.failed(ctx, "", fmt.Errorf("receive: %w", err))
			failures++
			sleep(ctx, time.Duration(min(failures, 6))*time.Second)
			continue
		}
		failures = 0
		p.batch(ctx, out.Messages)
	}
	return nil
}

// receive long-polls once; nil and no error when ctx ended first. The
// request is not cancelled with ctx: SQS goes on serving a poll whose
// connection was dropped until its wait ends, and would give what it then
// receives to a consumer that is gone, invisible for the visibility
// timeout (on a FIFO queue, its group with it). Run returns at once
// instead, and the abandoned poll, when it answers, makes what it
// received visible again and reports it skipped (possibly after Run has
// returned; if the process exits first, those messages come back when
// their visibility timeout lapses, as after a crash).
func (p *Poller) receive(ctx context.Context) (*sqs.ReceiveMessageOutput, error) {
	type answer struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	answered := make(chan answer, 1)
	work := context.WithoutCancel(ctx)
	go func() {
		out, err := p.API.ReceiveMessage(work, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.QueueURL), MaxNumberOfMessages: 10,
			WaitTimeSeconds:             int32(p.wait() / time.Second),
			VisibilityTimeout:           int32(p.visibility() / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId},
		})
		answered <- answer{out, err}
	}()
	select {
	case a := <-answered:
		if a.err == nil && a.out == nil {
			a.out = &sqs.ReceiveMessageOutput{}
		}
		return a.out, a.err
	case <-ctx.Done():
		go func() {
			a := <-answered
			if a.err == nil && a.out != nil && len(a.out.Messages) > 0 {
				p.release(work, a.out.Messages)
				p.skip(work, a.out.Messages, errors.Join(ErrSkipped, ctx.Err()))
			}
		}()
		return nil, nil
	}
}

// maxVisibility is the longest visibility timeout SQS takes.
const maxVisibility = 12 * time.Hour

func (p *Poller) visibility() time.Duration {
	if p.Visibility <= 0 {
		return 30 * time.Second
	}
	return max(wholeSeconds(p.Visibility), time.Second)
}

func (p *Poller) wait() time.Duration {
	if p.Wait <= 0 {
		return 20 * time.Second
	}
	return min(wholeSeconds(p.Wait), 20*time.Second)
}

// wholeSeconds rounds d up to whole seconds, the unit SQS takes a wait
// and a visibility timeout in: truncated, a sub-second wait became a
// short poll (a receive loop spinning on an empty queue), and a
// visibility of 1.5 s was sent as 1 s while it was renewed every 0.5 s.
func wholeSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

func (p *Poller) failed(ctx context.Context, id string, err error) {
	// Groups fail concurrently; the user's writer and hook need not be
	// safe for that.
	p.hooks.Lock()
	defer p.hooks.Unlock()
	loud(ctx, p.Logger, p.Metrics, queueName(p.QueueURL), id, err)
	if p.OnFailure != nil {
		p.OnFailure(ctx, id, err)
	}
}

// batch applies one receive's messages: a group's in order, the groups
// at most Concurrency at once. It stops starting messages once ctx ends;
// the messages started are applied, and deleted, regardless.
func (p *Poller) batch(ctx context.Context, msgs []types.Message) {
	if len(msgs) == 0 {
		return
	}
	work := context.WithoutCancel(ctx)
	var groups [][]types.Message
	index := map[string]int{}
	for i, m := range msgs {
		g, ok := m.Attributes[groupAttribute]
		if !ok || !strings.HasSuffix(p.QueueURL, ".fifo") {
			// A standard queue's message is its own group, a fair
			// queue's too: its group id holds no order.
			g = "\x00" + strconv.Itoa(i)
		}
		if j, seen := index[g]; seen {
			groups[j] = append(groups[j], m)
			continue
		}
		index[g] = len(groups)
		groups = append(groups, []types.Message{m})
	}

	stop := p.extend(work, msgs)
	var mu sync.Mutex
	var done, unstarted []types.Message
	var wg sync.WaitGroup
	n := p.Concurrency
	if n <= 0 {
		n = 4
	}
	slots := make(chan struct{}, n)
	for _, group := range groups {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			for i, m := range group {
				if ctx.Err() != nil {
					p.skip(work, group[i:], errors.Join(ErrSkipped, ctx.Err()))
					mu.Lock()
					unstarted = append(unstarted, group[i:]...)
					mu.Unlock()
					return
				}
				if !p.apply(work, m) {
					// The group's later messages wait for this one.
					p.skip(work, group[i+1:], ErrSkipped)
					mu.Lock()
					unstarted = append(unstarted, group[i+1:]...)
					mu.Unlock()
					return
				}
				mu.Lock()
				done = append(done, m)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stop()
	p.delete(work, done)
	p.release(work, unstarted)
}

// apply decodes and applies one message, reports its outcome, and
// reports whether it is done.
func (p *Poller) apply(ctx context.Context, msg types.Message) bool {
	m, err := FromQueue(p.QueueURL, msg)
	o := OutcomeFailed
	if err == nil {
		o, err = applyMessage(ctx, m, p.Apply, p.Closed)
	}
	p.report(ctx, Result{MessageID: aws.ToString(msg.MessageId), Message: m, Outcome: o, Err: err})
	if !o.Done() {
		p.failed(ctx, aws.ToString(msg.MessageId), err)
	}
	return o.Done()
}

// skip reports messages not started.
func (p *Poller) skip(ctx context.Context, msgs []types.Message, why error) {
	for _, msg := range msgs {
		m, _ := FromQueue(p.QueueURL, msg) // the zero Message if it cannot be decoded
		p.report(ctx, Result{MessageID: aws.ToString(msg.MessageId), Message: m, Outcome: OutcomeSkipped, Err: why})
	}
}

// report gives r to OnResult, one call at a time.
func (p *Poller) report(ctx context.Context, r Result) {
	if p.OnResult == nil {
		return
	}
	p.hooks.Lock()
	defer p.hooks.Unlock()
	p.OnResult(ctx, r)
}

// extend renews the messages' visibility every third of it until the
// returned stop is called.
func (p *Poller) extend(ctx context.Context, msgs []types.Message) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(p.visibility() / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p.setVisibility(ctx, msgs, p.visibility(), "extend visibility")
		}
	}()
	return func() { cancel(); <-finished }
}

// release makes messages that were not applied (behind their group's
// failure, or not started at shutdown) visible at once, for this or
// another consumer to take. The message that failed is left to its
// visibility timeout, which spaces out its retries; on a FIFO queue SQS
// gives its group's later messages only after it. (moto's FIFO emulation
// gives a group's later message first when they lapse together, which
// releasing them also avoids.)
func (p *Poller) release(ctx context.Context, msgs []types.Message) {
	if len(msgs) > 0 {
		p.setVisibility(ctx, msgs, 0, "release")
	}
}

// setVisibility sets the messages' visibility timeout in one request.
func (p *Poller) setVisibility(ctx context.Context, msgs []types.Message, d time.Duration, op string) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
			ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: int32(d / time.Second)}
	}
	out, err := p.API.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{
		QueueUrl: aws.String(p.QueueURL), Entries: entries,
	})
	if err != nil {
		if ctx.Err() == nil {
			p.failed(ctx, "", fmt.Errorf("%s: %w", op, err))
		}
		return
	}
	p.entriesFailed(ctx, msgs, out.Failed, op)
}

// entriesFailed reports the entries of a batch request that failed.
func (p *Poller) entriesFailed(ctx context.Context, msgs []types.Message, failed []types.BatchResultErrorEntry, op string) {
	for _, f := range failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(msgs) {
			p.failed(ctx, aws.ToString(msgs[i].MessageId), fmt.Errorf("%s: %s: %s", op, aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
}

// delete deletes the applied messages in one request (a receive gives
// at most 10). A message whose delete fails is received again, and its
// Apply then finds it done.
func (p *Poller) delete(ctx context.Context, msgs []types.Message) {
	if len(msgs) == 0 {
		return
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	out, err := p.API.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: entries})
	if err != nil {
		p.failed(ctx, "", fmt.Errorf("delete: %w", err))
		return
	}
	p.entriesFailed(ctx, msgs, out.Failed, "delete")
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
