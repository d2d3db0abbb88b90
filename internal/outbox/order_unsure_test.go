package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// From an adversarial review of the skip rule: it read only the dead
// head's LAST attempt, so an earlier attempt of unknown outcome (a
// timeout, a lapsed claim) was forgotten once a later one failed
// definitely, and a redrive cleared the mark. The row now keeps the time
// of its latest unsure send (Row.UnsureAt, unsure_at), whatever comes
// after; these tests failed before that, with arrivals s, p.

// earlyUnsureSQS is SQS where the first request carrying lateKey's row ends with
// its outcome unknown and is stored later (when the test lands it), and
// every later request carrying lateKey gets a per-entry refusal for it
// (a throttle of that entry: SenderFault, RequestThrottled), which the
// router reports as outbox.Refused, a definite failure. If onFirst is set,
// it runs when the first request is taken (a crash of the sender, say).
type earlyUnsureSQS struct {
	delivery.SQSAPI
	lateKey string
	onFirst func()
	mu      sync.Mutex
	calls   int
	pending *sqs.SendMessageBatchInput
}

func (s *earlyUnsureSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var mine *types.SendMessageBatchRequestEntry
	var rest []types.SendMessageBatchRequestEntry
	for _, e := range in.Entries {
		// The row's requests, not the message closing its place.
		if _, closing := e.MessageAttributes[target.AttrClosed]; aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue) == s.lateKey && !closing {
			mine = &e
			continue
		}
		rest = append(rest, e)
	}
	if mine == nil {
		return s.SQSAPI.SendMessageBatch(ctx, in, opts...)
	}
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	if first {
		s.pending = in
	}
	s.mu.Unlock()
	if first {
		if s.onFirst != nil {
			s.onFirst()
		}
		return nil, fmt.Errorf("operation error SQS: SendMessageBatch, https response error: %w", context.DeadlineExceeded)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(rest) > 0 {
		o, err := s.SQSAPI.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: rest}, opts...)
		if err != nil {
			return nil, err
		}
		out = o
	}
	out.Failed = append(out.Failed, types.BatchResultErrorEntry{
		Id: mine.Id, Code: aws.String("RequestThrottled"), SenderFault: true, Message: aws.String("injected: entry throttled"),
	})
	return out, nil
}

// land stores the first request, the one the client gave up on.
func (s *earlyUnsureSQS) land(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	late := s.pending
	s.mu.Unlock()
	require.NotNil(t, late, "no request was left unsure")
	_, err := s.SQSAPI.SendMessageBatch(context.Background(), late)
	require.NoError(t, err)
}

// TestOrdered_AnUnsureEarlierAttemptHoldsTheGroupThoughTheFinalAttemptIsRefused:
// under skip, with MaxAttempts 2, group g holds p then s.
//
//  1. p's attempt 1 is sent and ends with its outcome unknown: the client
//     times out (subtest "timed out"), or the sender crashes with the
//     request on the wire and its claim lapses (subtest "claim lost").
//     SQS has read the request and will store it later.
//  2. Backoff (about 1 s) or the lapsed lease later, p's attempt 2, its
//     final one, gets a per-entry refusal (a throttle): outbox.Refused,
//     "definite". The engine dead-letters p with unsure unset, since only
//     the LAST attempt's outcome is consulted (markUnsure/lastUnsure, and
//     a lapsed claim leaves no history entry at all), and under skip s
//     goes at once.
//  3. SQS stores attempt 1 of p, within the UnsureMargin the policy itself
//     allows for a late store. Its deduplication id is p's key, which SQS
//     never stored (attempt 2 was refused), so it is p's FIRST arrival:
//     after s. The group's first arrivals are s, p: a reordering, not a
//     gap. UnsureWait would have prevented it had the dead letter been
//     marked unsure for the earlier attempt.
func TestOrdered_AnUnsureEarlierAttemptHoldsTheGroupThoughTheFinalAttemptIsRefused(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		name := "timed out"
		if crash {
			name = "claim lost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarnessShards(t, 1)
			keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
			p, s := keys[0], keys[1]

			policy := orderedPolicy(outbox.DeadHeadSkip)
			policy.MaxAttempts = 2
			policy.Jitter = 0

			ctxA, crashA := context.WithCancel(ctx)
			defer crashA()
			api := &earlyUnsureSQS{SQSAPI: awstest.SQS(t), lateKey: p}
			if crash {
				api.onFirst = crashA // the sender dies with p's request on the wire
			}
			router, err := delivery.New(delivery.Clients{SQS: api}, h.routes, 0)
			require.NoError(t, err)
			e := h.engine(t, policy, router)

			// Sweep A: p's attempt 1 ends unsure; s waits.
			resA, _ := e.Sweep(ctxA)
			t.Logf("sweep A: %+v", resA)
			require.Zero(t, resA.Delivered)
			require.Equal(t, 1, h.row(t, p).Attempt)
			if crash {
				require.Equal(t, outbox.StatusClaimed, h.row(t, p).Status, "the crashed sender's claim stays")
				h.clock.Advance(policy.Lease + time.Second) // the claim lapses
			} else {
				require.Equal(t, outbox.StatusPending, h.row(t, p).Status)
				h.clock.Advance(2 * time.Second) // p's retry is due
			}

			// Sweep B: p's final attempt is refused for its entry.
			resB, err := e.Sweep(ctx)
			require.NoError(t, err)
			t.Logf("sweep B: %+v", resB)
			// p is to be a dead letter: first its place closes, once
			// its unsure request can no longer land.
			dead := h.row(t, p)
			require.Equal(t, outbox.StatusPending, dead.Status)
			require.Equal(t, outbox.ClosedDeadLetter, dead.Closed)
			require.False(t, dead.DueAt.Before(dead.UnsureAt.Add(policy.UnsureWait()).Truncate(time.Millisecond)), "closed only once the unsure wait is over (to the millisecond the store keeps)")
			t.Logf("p's history: %+v", dead.Errors)

			// SQS stores p's first request now, well inside the margin
			// the policy allows (seconds after the client gave up).
			api.land(t)

			// Later sweeps, past any wait, deliver what remains.
			h.clock.Advance(policy.UnsureWait() + time.Second)
			_, err = e.Sweep(ctx)
			require.NoError(t, err)

			got := firstArrivals(awstest.ReceiveKeys(t, h.routes["events.fifo"], 3, 5*time.Second)) // p, its place's closing message, s
			t.Logf("SQS order of group g: %v (staged %v)", got, keys)
			require.Equal(t, []string{p, s}, got, "first arrivals of group g out of staging order: s passed p's earlier, unsure request")
			require.Equal(t, outbox.StatusFailed, h.row(t, p).Status, "p ends a dead letter")
		})
	}
}

// TestOrdered_ARedriveDuringTheUnsureWaitKeepsTheWait:
// under skip, MaxAttempts 1, group g holds p then s.
//
//  1. p's only attempt times out on the client (SQS will store it later):
//     p is a dead letter marked unsure, and s waits UnsureWait. So far as
//     the change promises.
//  2. Seconds later, inside that wait, an operator redrives p (the
//     documented remedy for a dead letter: "it goes again, first").
//     Store.Redrive removes the unsure mark.
//  3. The next sweep claims p; SQS refuses its entry (a throttle):
//     definite, and final, so p is dead again with no unsure mark, and s
//     goes at once.
//  4. SQS stores p's first request, still inside the margin the policy
//     allows. Its deduplication id (p's key) was never stored, so this is
//     p's first arrival, after s: a reordering.
//
// The wait the first failure started is forgotten: neither the redrive
// nor the later definite failure keeps it.
func TestOrdered_ARedriveDuringTheUnsureWaitKeepsTheWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p, s := keys[0], keys[1]

	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 1
	api := &earlyUnsureSQS{SQSAPI: awstest.SQS(t), lateKey: p}
	router, err := delivery.New(delivery.Clients{SQS: api}, h.routes, 0)
	require.NoError(t, err)
	e := h.engine(t, policy, router)

	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	t.Logf("sweep 1: %+v", res)
	require.Equal(t, 1, res.DeadLettered)
	require.Zero(t, res.Delivered, "s waits out p's unsure end")

	// The operator redrives p a few seconds later, inside the wait: p
	// is no dead letter yet (its place closes first, once no copy of it
	// can land), so the redrive is refused and the wait kept. (Before
	// places were closed, p was a dead letter here, and the redrive was
	// taken.)
	h.clock.Advance(5 * time.Second)
	var conflict *outbox.ConflictError
	require.ErrorAs(t, h.store.Redrive(ctx, p, h.clock.Now()), &conflict)
	require.Equal(t, outbox.ClosedDeadLetter, conflict.Current.Closed)

	res, err = e.Sweep(ctx)
	require.NoError(t, err)
	t.Logf("sweep 2: %+v", res)

	api.land(t) // p's first request, stored late

	h.clock.Advance(policy.UnsureWait() + time.Second)
	_, err = e.Sweep(ctx)
	require.NoError(t, err)

	got := firstArrivals(awstest.ReceiveKeys(t, h.routes["events.fifo"], 3, 5*time.Second)) // p, its place's closing message, s
	t.Logf("SQS order of group g: %v (staged %v)", got, keys)
	require.Equal(t, []string{p, s}, got, "first arrivals of group g out of staging order: s passed p's late first request")
}

// gatedTimeout is a deliverer that, handed key, waits for release and then
// answers with a timeout (outcome unknown); other rows go to next.
type gatedTimeout struct {
	next    outbox.Deliverer
	key     string
	handed  chan struct{}
	release chan struct{}
}

func (g *gatedTimeout) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	for _, r := range rows {
		if r.Key == g.key {
			close(g.handed)
			<-g.release
			errs := make([]error, len(rows))
			for i := range errs {
				errs[i] = fmt.Errorf("send batch: %w", context.DeadlineExceeded)
			}
			return errs
		}
	}
	return g.next.Deliver(ctx, queue, rows)
}

// TestOrdered_TheWakePollingAClaimedHeadDoesNotSendBehindItsUnsureDeadLetter
// (held): under skip, the wake's head check for s polls p, claimed by a
// sweep elsewhere (in flight, so it waits up to HeadWait). Mid-poll p's
// final attempt times out and p becomes an unsure dead letter. The wake
// must not take it for settled.
func TestOrdered_TheWakePollingAClaimedHeadDoesNotSendBehindItsUnsureDeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p, s := keys[0], keys[1]
	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 1
	policy.HeadWait = 3 * time.Second

	g := &gatedTimeout{next: h.sqs, key: p, handed: make(chan struct{}), release: make(chan struct{})}
	sweep := h.engine(t, policy, g)
	done := make(chan outbox.Result, 1)
	go func() { res, _ := sweep.Sweep(ctx); done <- res }()
	<-g.handed

	log := &sendLog{next: h.sqs}
	wake := h.engine(t, policy, log)
	wdone := make(chan outbox.Result, 1)
	go func() {
		res, _ := wake.DeliverRefs(ctx, []outbox.DueRef{{Key: s, Queue: "events.fifo", Prev: p, Seq: 2, Linked: true}})
		wdone <- res
	}()
	time.Sleep(300 * time.Millisecond) // the wake is polling p
	close(g.release)
	resA := <-done
	t.Logf("sweep: %+v", resA)
	require.Equal(t, 1, resA.DeadLettered)
	resW := <-wdone
	t.Logf("wake: %+v", resW)
	require.Zero(t, resW.Delivered, "the wake sent s behind p's unsure dead letter")
	require.Empty(t, log.accepted()["g"])
}
