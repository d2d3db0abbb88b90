package moto_test

// An adversarial review of the patched moto's FIFO emulation against
// Amazon SQS. Each test is a deterministic sequence of calls on a server
// of its own; where a visibility timeout has to lapse, the server's SQS
// clock is stepped (moto.StepSQSClock) around exactly one receive, which
// reads the clock once per pass, so no test sleeps.

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/moto"
)

type fifoQueue struct {
	t        *testing.T
	ctx      context.Context
	client   *sqs.Client
	url      string
	endpoint string
}

func newFIFOQueue(t *testing.T) *fifoQueue {
	t.Helper()
	ctx := context.Background()
	srv, err := moto.Start(ctx)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	cfg, err := awstest.Config(ctx, srv.URL)
	require.NoError(t, err)
	client := sqs.NewFromConfig(cfg)
	return &fifoQueue{t: t, ctx: ctx, client: client, url: awstest.NewQueueOn(t, client, true), endpoint: srv.URL}
}

// send sends each body as its own message of group g, its body its
// deduplication id.
func (q *fifoQueue) send(group string, bodies ...string) {
	q.t.Helper()
	for _, b := range bodies {
		_, err := q.client.SendMessage(q.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(b),
			MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(b)})
		require.NoError(q.t, err)
	}
}

func (q *fifoQueue) receive(n, visibility int32) []types.Message {
	q.t.Helper()
	out, err := q.client.ReceiveMessage(q.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: n, VisibilityTimeout: visibility})
	require.NoError(q.t, err)
	return out.Messages
}

// receiveAfter receives once with the SQS clock moved on by d first: the
// pass reads the clock once, so every visibility shorter than d has
// lapsed by then, and the clock keeps what it gained.
func (q *fifoQueue) receiveAfter(d time.Duration, n, visibility int32) []types.Message {
	q.t.Helper()
	require.NoError(q.t, moto.StepSQSClock(q.ctx, q.endpoint, d))
	got := q.receive(n, visibility)
	require.NoError(q.t, moto.StepSQSClock(q.ctx, q.endpoint, 0))
	return got
}

// setVisibility is one ChangeMessageVisibility; its error is returned, as
// SQS refuses some of these calls.
func (q *fifoQueue) setVisibility(m types.Message, seconds int32) error {
	_, err := q.client.ChangeMessageVisibility(q.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.url),
		ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: seconds})
	return err
}

func (q *fifoQueue) delete(m types.Message) error {
	_, err := q.client.DeleteMessage(q.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: m.ReceiptHandle})
	return err
}

func bodies(msgs []types.Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, aws.ToString(m.Body))
	}
	return out
}

// TestReview_AReleasedMessageHiddenAgainHoldsItsGroup: a consumer releases
// a group's head (ChangeMessageVisibility 0: the Poller's release of the
// messages it did not start), and a renewal of the same receipt that was
// already on its way lands after the release (the Poller cancels its
// renewal goroutine before it releases, but a renewal request already sent
// is still served; moto serves requests on threads, in any order). SQS
// refuses the late renewal (the message is not in flight: MessageNotInflight,
// or the FIFO receipt handle has expired), so the head is visible and goes
// first; were it accepted, the head would be in flight and hold its group.
// Either way SQS never hands out the head's successor while the head is
// hidden. moto takes the renewal, hides the head again outside its
// "pending" set, from which the patched server derives the groups in
// flight, and hands out the successor.
func TestReview_AReleasedMessageHiddenAgainHoldsItsGroup(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "a", "b")

	got := q.receive(1, 30)
	require.Equal(t, []string{"a"}, bodies(got))
	require.NoError(t, q.setVisibility(got[0], 0), "the release")
	lateRenewal := q.setVisibility(got[0], 30)
	t.Logf("late renewal of the released head: err=%v (SQS: MessageNotInflight / expired receipt)", lateRenewal)

	// Adopted with one change: SQS may hand out a group's messages in
	// one batch, in order, so b may come with a; never before it.
	next := bodies(q.receive(10, 30))
	require.NotEmpty(t, next, "a is visible: its late renewal was refused")
	require.Equal(t, "a", next[0], "b handed out while a (hidden again) had not gone: got %v", next)
}

// TestReview_ALapsedMessageRenewedLateHoldsItsGroup: a consumer holds a
// batch [a b] of one group and renews it; one renewal comes late, after
// both lapsed, and moto serves the batch's entries one at a time, so a
// receive can run between the entry for a and the entry for b. That
// receive finds b visible, drops it from moto's pending set and skips it
// (a holds the group again). The entry for b then hides b again, outside
// the pending set. The consumer applies a, fails on b (b left to its
// visibility, as the Poller leaves a failed message) and deletes a. SQS:
// b's renewal is refused (b was not in flight: its FIFO receipt had
// expired), so b is visible and is delivered next; had SQS taken it, b
// would hold the group while hidden. Either way SQS never delivers c
// before b. moto sees no message of the group pending and hidden, and
// hands out c while b is hidden.
func TestReview_ALapsedMessageRenewedLateHoldsItsGroup(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "a", "b", "c")

	batch := q.receive(2, 1)
	require.Equal(t, []string{"a", "b"}, bodies(batch))
	a, b := batch[0], batch[1]
	// The late renewal's first entry: a was renewed (in moto's clock it
	// has not lapsed yet, so this is the renewal that arrives in time).
	require.NoError(t, q.setVisibility(a, 30))
	// 1.5 s on: b's visibility lapsed, a's did not. Another consumer's
	// receive walks the queue between the renewal's two entries.
	require.Empty(t, bodies(q.receiveAfter(1500*time.Millisecond, 10, 30)), "a in flight holds the group")
	// The renewal's second entry, for b.
	lateRenewal := q.setVisibility(b, 30)
	t.Logf("late renewal of lapsed b: err=%v (SQS: MessageNotInflight / expired receipt)", lateRenewal)
	// The consumer applied a, failed on b: it deletes a only.
	require.NoError(t, q.delete(a))

	// Adopted with one change: c may come in b's batch, after it.
	next := bodies(q.receive(10, 30))
	require.NotEmpty(t, next, "b is visible: its late renewal was refused")
	require.Equal(t, "b", next[0], "c handed out while b was hidden (not deleted): got %v", next)
}

// TestReview_AStaleReceiptCannotReleaseAnotherConsumersMessage: consumer 1
// receives a, its visibility lapses, consumer 2 receives a again (a new
// receipt handle). Consumer 1, late, releases a with its old handle (the
// Poller's release of unstarted messages). On a FIFO queue SQS refuses the
// old handle (the receipt handle has expired; the message is in flight
// under another receipt), so a stays in flight with consumer 2 and the
// group is held: nothing of it is delivered. moto honours any handle a
// message ever had, makes a visible again, and delivers a and b to a third
// receive while consumer 2 still holds a: two consumers work one group.
func TestReview_AStaleReceiptCannotReleaseAnotherConsumersMessage(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "a", "b")

	first := q.receive(1, 1)
	require.Equal(t, []string{"a"}, bodies(first))
	second := q.receiveAfter(1500*time.Millisecond, 1, 30)
	require.Equal(t, []string{"a"}, bodies(second), "a redelivered once its visibility lapsed")

	staleRelease := q.setVisibility(first[0], 0)
	t.Logf("release with consumer 1's expired handle: err=%v (SQS FIFO: refused)", staleRelease)

	require.Empty(t, bodies(q.receive(10, 30)), "consumer 2 holds a: nothing of the group may be delivered")
}

// TestReview_AStaleReceiptCannotDeleteAnotherConsumersMessage: as above,
// but consumer 1 deletes a with its expired handle. SQS: the FIFO receipt
// handle has expired, so the delete is refused (or, as the DeleteMessage
// reference puts it, an old handle "succeeds, but the message might not be
// deleted"); a stays in flight under consumer 2's receipt and, if consumer 2
// never deletes it, comes back when that visibility lapses. moto deletes
// a with any handle it ever had: the copy SQS would redeliver (and an inbox
// would refuse as a duplicate) never comes, so the soak under-exercises
// the duplicate path that real SQS drives.
func TestReview_AStaleReceiptCannotDeleteAnotherConsumersMessage(t *testing.T) {
	t.Parallel()
	q := newFIFOQueue(t)
	q.send("g", "a")

	first := q.receive(1, 1)
	require.Equal(t, []string{"a"}, bodies(first))
	second := q.receiveAfter(1500*time.Millisecond, 1, 30)
	require.Equal(t, []string{"a"}, bodies(second))

	staleDelete := q.delete(first[0])
	t.Logf("delete with consumer 1's expired handle: err=%v (SQS FIFO: refused, or not deleted)", staleDelete)

	// Consumer 2 dies without deleting: its visibility (30 s) lapses.
	require.Equal(t, []string{"a"}, bodies(q.receiveAfter(31*time.Second, 10, 30)), "a comes back: only its latest receipt could delete it")
}
