package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Adopted from an outside review (shared/review/ordering): under skip, a
// head whose final attempt timed out on the client was dead-lettered and
// its successor sent in the same run, so a late copy of the head, stored by
// SQS after the client gave up, landed after the successor.

// lateSQS is SQS with one request (the first with lateKey) that times out on the client (as the
// policy's CallTimeout cancels it) but is stored by SQS later, when the
// test lands it. Nothing promises otherwise: a timed-out
// SendMessageBatch "may or may not" have been stored.
type lateSQS struct {
	delivery.SQSAPI
	lateKey string
	mu      sync.Mutex
	pending *sqs.SendMessageBatchInput
}

func (s *lateSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for _, e := range in.Entries {
		if aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue) == s.lateKey {
			s.mu.Lock()
			first := s.pending == nil
			if first {
				s.pending = in
			}
			s.mu.Unlock()
			if first {
				return nil, fmt.Errorf("operation error SQS: SendMessageBatch, https response error: %w", context.DeadlineExceeded)
			}
		}
	}
	return s.SQSAPI.SendMessageBatch(ctx, in, opts...)
}

// land stores the request the client gave up on.
func (s *lateSQS) land(t *testing.T) {
	s.mu.Lock()
	late := s.pending
	s.mu.Unlock()
	require.NotNil(t, late, "no request timed out")
	_, err := s.SQSAPI.SendMessageBatch(context.Background(), late)
	require.NoError(t, err)
}

// TestReview_AnAmbiguousFinalFailureUnderSkipLetsTheSuccessorPassTheHead:
// a head p whose final attempt times out is dead-lettered as unsure, and
// under skip its successor s waits until no copy of p can land
// (Policy.UnsureWait past p's failure), however many sweeps run meanwhile;
// SQS stores p's timed-out request within that wait. The group's first
// arrivals are p, s: staging order. Before the fix s went in the same
// sweep, and p's late copy landed after it. Applies to the functions too
// (no lease is involved).
func TestReview_AnAmbiguousFinalFailureUnderSkipLetsTheSuccessorPassTheHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p, s := keys[0], keys[1]

	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 1 // p's one attempt is its final one
	api := &lateSQS{SQSAPI: awstest.SQS(t), lateKey: p}
	router, err := delivery.New(delivery.Clients{SQS: api}, h.routes, 0)
	require.NoError(t, err)
	e := h.engine(t, policy, router)

	// Phase 1: p's attempt times out; p is dead, unsure; s waits.
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	t.Logf("sweep: %+v", res)
	require.Equal(t, 1, res.DeadLettered)
	require.Zero(t, res.Delivered, "s went in the same sweep, behind p's ambiguous failure")
	require.Equal(t, 1, res.Waiting, "s waits for p's unsure end")
	require.Zero(t, res.BlockedGroups, "a bounded wait, not a blocked group")

	// Phase 2: SQS stores p's request late; a sweep just inside the wait
	// still leaves s.
	api.land(t)
	h.clock.Advance(policy.UnsureWait() - time.Millisecond)
	res, err = e.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Delivered, "s went before p's unsure wait was over")

	// Phase 3: past the wait, the message closing p's place goes (SQS
	// drops it as a copy of p, whose late request it stored within its
	// deduplication window), then s.
	h.clock.Advance(time.Millisecond)
	res, err = e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered, "s went once p could no longer land")

	got := firstArrivals(awstest.ReceiveKeys(t, h.routes["events.fifo"], 3, 5*time.Second)) // p, its place's closing message, s
	t.Logf("SQS order of group g: %v (staged %v)", got, keys)
	require.Equal(t, []string{p, s}, got, "first arrivals of group g out of staging order")
}
