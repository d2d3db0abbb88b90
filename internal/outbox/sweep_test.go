package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

func attr(m types.Message, name string) string {
	v, ok := m.MessageAttributes[name]
	if !ok {
		return ""
	}
	return aws.ToString(v.StringValue)
}

func TestSweep_DeliversEveryRowAcrossQueuesWithKeyAttemptAndAttributes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	staged := map[string][]outbox.Row{
		"orders":      rowsFor("orders", 30, ""),
		"emails":      rowsFor("emails", 25, ""),
		"events.fifo": rowsFor("events.fifo", 15, "tenant-1"),
	}
	binary := outbox.Row{Key: "bin", Queue: "orders", Payload: []byte{0x00, 0xff, 0x10, 'a'}}
	staged["orders"] = append(staged["orders"], binary)
	total := 0
	for _, rows := range staged {
		h.stage(t, rows...)
		total += len(rows)
	}

	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, total, res.Claimed)
	require.Equal(t, total, res.Delivered)
	require.Zero(t, res.Retried+res.DeadLettered+res.Released+res.Conflicts+res.Errors)
	require.Equal(t, "drained", res.Stopped)

	for queue, rows := range staged {
		msgs := awstest.Receive(t, h.routes[queue], len(rows), 20*time.Second)
		require.Len(t, msgs, len(rows), queue)
		byKey := map[string]types.Message{}
		for _, m := range msgs {
			byKey[attr(m, delivery.AttrKey)] = m
		}
		for _, row := range rows {
			m, ok := byKey[row.Key]
			require.True(t, ok, "message for %s", row.Key)
			require.Equal(t, "1", attr(m, delivery.AttrAttempt))
			body, isBinary := target.Body(row.Payload)
			require.Equal(t, body, aws.ToString(m.Body), "body byte for byte")
			if isBinary {
				require.Equal(t, "base64", attr(m, delivery.AttrEncoding))
			}
			for k, v := range row.Attributes {
				require.Equal(t, v, attr(m, k))
			}
			if queue == "events.fifo" {
				require.Equal(t, "tenant-1", m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)])
				require.Equal(t, row.Key, m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)])
			}
			h.gone(t, row.Key)
		}
	}
}

func TestSweep_TransientFailureRetriesWithJitteredBackoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rows := rowsFor("orders", 20, "")
	h.stage(t, rows...)
	p := testPolicy()
	p.BackoffBase = 10 * time.Second
	p.Jitter = 0.25
	flaky := faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return errors.New("connection reset") }}

	now := h.clock.Now()
	res, err := h.engine(t, p, flaky).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, len(rows), res.Retried)

	lo, hi := now.Add(p.BackoffBase*3/4-time.Millisecond), now.Add(p.BackoffBase*5/4+time.Millisecond)
	distinct := map[time.Time]bool{}
	for _, r := range rows {
		got := h.row(t, r.Key)
		require.Equal(t, outbox.StatusPending, got.Status)
		require.Equal(t, 1, got.Attempt)
		require.True(t, !got.DueAt.Before(lo) && !got.DueAt.After(hi), "due %s outside [%s, %s]", got.DueAt, lo, hi)
		require.Equal(t, "connection reset", got.LastError)
		require.Len(t, got.Errors, 1)
		distinct[got.DueAt] = true
	}
	require.Greater(t, len(distinct), 1, "jitter spreads retries")

	// Nothing is due until the backoff passes; then the rows go out on attempt 2.
	res, err = h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Claimed)
	h.clock.Advance(p.BackoffBase * 2)
	res, err = h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, len(rows), res.Delivered)
	for _, m := range awstest.Receive(t, h.routes["orders"], len(rows), 20*time.Second) {
		require.Equal(t, "2", attr(m, delivery.AttrAttempt))
	}
}

func TestSweep_FinalFailureDeadLettersWithHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 1, "")...)
	p := testPolicy()
	failing := faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return errors.New("service unavailable") }}
	e := h.engine(t, p, failing)
	for attempt := 1; attempt <= p.MaxAttempts; attempt++ {
		res, err := e.Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, res.Claimed, "attempt %d", attempt)
		h.clock.Advance(p.BackoffMax + time.Second)
	}
	got := h.row(t, "orders-0")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, p.MaxAttempts, got.Attempt)
	require.Len(t, got.Errors, p.MaxAttempts)
	for i, e := range got.Errors {
		require.Equal(t, i+1, e.Attempt)
		require.Equal(t, "service unavailable", e.Message)
	}
	res, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Claimed, "a dead letter is never claimed again")
}

// senderFaultSQS answers SendMessageBatch itself, failing each entry as the
// sender's fault, as SQS does for an invalid message.
type senderFaultSQS struct{ delivery.SQSAPI }

func (senderFaultSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("bad message"), SenderFault: true})
	}
	return out, nil
}

func TestSweep_PermanentFailuresDeadLetterAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t,
		outbox.Row{Key: "nogroup", Queue: "events.fifo", Payload: []byte("x")},
		outbox.Row{Key: "refused", Queue: "emails", Payload: []byte("x")},
		outbox.Row{Key: "fine", Queue: "orders", Payload: []byte("x")},
	)
	refusing := sqsRouter(t, senderFaultSQS{}, h.routes)
	split := deliverByQueue{"emails": refusing, "": h.sqs}

	res, err := h.engine(t, testPolicy(), split).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, res.DeadLettered)
	require.Equal(t, 1, res.Delivered)
	require.Zero(t, res.Retried)

	for key, reason := range map[string]string{
		"nogroup": "a FIFO queue needs a message group",
		"refused": "sqs refused message: InvalidParameterValue: bad message",
	} {
		got := h.row(t, key)
		require.Equal(t, outbox.StatusFailed, got.Status, key)
		require.Equal(t, 1, got.Attempt, key)
		require.Contains(t, got.LastError, reason, key)
	}
	h.gone(t, "fine")
}

// deliverByQueue picks a deliverer per queue; "" is the default.
type deliverByQueue map[string]outbox.Deliverer

func (d deliverByQueue) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	if x, ok := d[queue]; ok {
		return x.Deliver(ctx, queue, rows)
	}
	return d[""].Deliver(ctx, queue, rows)
}

func TestSweep_FailedMarkDoneLeavesRowClaimedAndRedeliversAfterLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 1, "")...)
	p := testPolicy()
	broken := faultStore{Store: h.store, doneErr: func(outbox.Row) error { return errors.New("dynamodb unavailable") }}
	e, err := outbox.New(broken, h.sqs, p, outbox.WithClock(h.clock.Now))
	require.NoError(t, err)

	res, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.Equal(t, 1, res.Errors)
	require.Equal(t, outbox.StatusClaimed, h.row(t, "orders-0").Status)

	// Within the lease nobody touches it.
	res, err = h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Claimed)
	require.Equal(t, 1, res.Conflicts)

	h.clock.Advance(p.Lease + time.Second)
	res, err = h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	h.gone(t, "orders-0")

	msgs := awstest.Receive(t, h.routes["orders"], 2, 20*time.Second)
	require.Len(t, msgs, 2, "at least once: the row went out again")
	require.Equal(t, []string{"1", "2"}, []string{attr(msgs[0], delivery.AttrAttempt), attr(msgs[1], delivery.AttrAttempt)})
}

// blockingDeliverer never returns until its context ends: a sweep that
// crashes (times out) while sending.
type blockingDeliverer struct{ entered chan struct{} }

func (b blockingDeliverer) Deliver(ctx context.Context, _ string, rows []outbox.Row) []error {
	b.entered <- struct{}{}
	<-ctx.Done()
	errs := make([]error, len(rows))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}

func TestSweep_LostClaimsConsumeAttemptsUntilRowExpires(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 1, "")...)
	p := testPolicy()
	for attempt := 1; attempt <= p.MaxAttempts; attempt++ {
		crash := blockingDeliverer{entered: make(chan struct{}, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-crash.entered; cancel() }()
		_, err := h.engine(t, p, crash).Sweep(ctx)
		require.ErrorIs(t, err, context.Canceled)
		got := h.row(t, "orders-0")
		require.Equal(t, outbox.StatusClaimed, got.Status)
		require.Equal(t, attempt, got.Attempt)
		h.clock.Advance(p.Lease + time.Second)
	}
	res, err := h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Expired)
	require.Zero(t, res.Delivered)
	got := h.row(t, "orders-0")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, p.MaxAttempts, got.Attempt)
	require.Equal(t, "lease expired on final attempt", got.LastError)
}

// slowDeliverer takes delay of the engine's clock for each call, then
// delivers: time passes only as the engine works, however loaded the
// machine is.
type slowDeliverer struct {
	next  outbox.Deliverer
	clock *clock
	delay time.Duration
}

func (s slowDeliverer) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	s.clock.Advance(s.delay)
	return s.next.Deliver(ctx, queue, rows)
}

func TestSweep_ReleasesUnsentClaimsNearDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rows := rowsFor("orders", 100, "")
	h.stage(t, rows...)
	p := testPolicy()
	p.Concurrency = 1
	p.DeadlineMargin = time.Second
	// The invocation deadline is a minute away in real time, which no
	// call reaches; on the engine's clock, the margin begins 1.2 s after
	// the start, four 300 ms sends in.
	clk := newClock()
	deadline := clk.Now().Add(time.Minute)
	clk.Advance(time.Minute - p.DeadlineMargin - 1200*time.Millisecond)
	e, err := outbox.New(h.store, slowDeliverer{next: h.sqs, clock: clk, delay: 300 * time.Millisecond}, p, outbox.WithClock(clk.Now))
	require.NoError(t, err)

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, "deadline", res.Stopped)
	require.Positive(t, res.Released)
	require.Positive(t, res.Delivered)
	require.Equal(t, res.Claimed, res.Delivered+res.Released)

	pending := 0
	for _, r := range rows {
		got, err := h.store.Get(context.Background(), r.Key)
		require.NoError(t, err)
		if got == nil {
			continue
		}
		require.Equal(t, outbox.StatusPending, got.Status, r.Key)
		require.Equal(t, 0, got.Attempt, "a released row gets its attempt back")
		pending++
	}
	require.Equal(t, len(rows)-res.Delivered, pending)
}

func TestSweep_LeavesYoungRowsToTheWakeDuringGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := testPolicy()
	p.WakeGrace = 15 * time.Second
	h.stage(t, rowsFor("orders", 5, "")...)
	h.stage(t, outbox.Row{Key: "delayed", Queue: "orders", Payload: []byte("x"), NotBefore: h.clock.Now().Add(5 * time.Second)})

	res, err := h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 5, res.Skipped)
	require.Zero(t, res.Claimed)

	h.clock.Advance(6 * time.Second) // the delayed row is due; the wake never had it
	res, err = h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.Equal(t, 5, res.Skipped)

	h.clock.Advance(10 * time.Second)
	res, err = h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 5, res.Delivered)
	require.Zero(t, res.Skipped)
}

func TestSweep_ConcurrentSweepsDeliverEachRowExactlyOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rows := append(rowsFor("orders", 60, ""), rowsFor("emails", 60, "")...)
	h.stage(t, rows...)
	p := testPolicy()

	var wg sync.WaitGroup
	var sweepErrs goErrs
	results := make([]outbox.Result, 2)
	engines := []*outbox.Engine{h.engine(t, p, nil), h.engine(t, p, nil)}
	for i := range results {
		wg.Go(func() {
			res, err := engines[i].Sweep(context.Background())
			sweepErrs.add(err)
			results[i] = res
		})
	}
	wg.Wait()
	require.NoError(t, sweepErrs.err())
	require.Equal(t, len(rows), results[0].Delivered+results[1].Delivered)

	count := map[string]int{}
	for _, q := range []string{"orders", "emails"} {
		for _, m := range awstest.Receive(t, h.routes[q], 60, 20*time.Second) {
			count[attr(m, delivery.AttrKey)]++
		}
		// Nothing more arrives.
		require.Empty(t, awstest.Receive(t, h.routes[q], 1, 1500*time.Millisecond))
	}
	require.Len(t, count, len(rows))
	for k, n := range count {
		require.Equal(t, 1, n, k)
	}
}

func TestDeliverKeys_DeliversExactlyTheNamedDueRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rows := rowsFor("orders", 6, "")
	h.stage(t, rows...)
	h.stage(t, outbox.Row{Key: "later", Queue: "orders", Payload: []byte("x"), NotBefore: h.clock.Now().Add(time.Hour)})
	p := testPolicy()
	p.WakeGrace = time.Hour // the wake ignores the grace

	keys := []string{rows[0].Key, rows[1].Key, rows[1].Key, "later", "missing"}
	res, err := h.engine(t, p, nil).DeliverKeys(context.Background(), keys)
	require.NoError(t, err)
	require.Equal(t, 2, res.Delivered)
	require.Equal(t, 2, res.Conflicts, "not due and missing are left to the sweep")
	h.gone(t, rows[0].Key)
	h.gone(t, rows[1].Key)
	for _, r := range rows[2:] {
		require.Equal(t, outbox.StatusPending, h.row(t, r.Key).Status)
	}
	got := awstest.Receive(t, h.routes["orders"], 2, 20*time.Second)
	require.Len(t, got, 2)
}

func TestSweep_StopsAtRowBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 30, "")...)
	p := testPolicy()
	p.RowBudget = 12
	res, err := h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, "budget", res.Stopped)
	require.Equal(t, 12, res.Claimed)
	require.Equal(t, 12, res.Delivered)
	res, err = h.engine(t, p, nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 12, res.Delivered)
}

func TestSweep_DeadLettersMalformedRowsWithoutHoldingUpOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 5, "")...)
	putRaw(t, h, "nopayload", false)
	putRaw(t, h, "foreign", true)

	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 5, res.Delivered)
	require.Equal(t, 2, res.DeadLettered)
	for _, key := range []string{"nopayload", "foreign"} {
		got, _ := h.store.Get(context.Background(), key)
		require.NotNil(t, got)
		require.Equal(t, outbox.StatusFailed, got.Status, key)
		require.Contains(t, got.LastError, "malformed", key)
	}
}

func TestSweep_LogsNeverCarryPayloadsOrAttributeValues(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	secret := func(i int) string { return fmt.Sprintf("top-secret-%d", i) }
	for i := range 6 {
		queue := []string{"orders", "nowhere", "emails"}[i%3]
		h.stage(t, outbox.Row{Key: fmt.Sprintf("k%d", i), Queue: queue, Payload: []byte(`{"card":"` + secret(i) + `"}`),
			Attributes: map[string]string{"customer": "attr-" + secret(i)}})
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	flaky := faults.Refuse{Next: h.sqs, Fail: func(r outbox.Row) error {
		if r.Queue == "emails" {
			return errors.New("throttled")
		}
		return nil
	}}
	e, err := outbox.New(h.store, flaky, testPolicy(), outbox.WithClock(h.clock.Now), outbox.WithLogger(log))
	require.NoError(t, err)
	res, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, res.Delivered)
	require.Equal(t, 4, res.Retried, "the throttled rows and those with no route")
	require.Equal(t, 2, res.Unrouted)
	// Then every retry until the budget is spent, and the dead letters.
	dead := 0
	for range testPolicy().MaxAttempts - 1 {
		h.clock.Advance(testPolicy().BackoffMax + time.Second)
		res, err = e.Sweep(context.Background())
		require.NoError(t, err)
		dead += res.DeadLettered
	}
	require.Equal(t, 4, dead)
	require.NotEmpty(t, logs.String(), "retries and dead letters are logged")
	for i := range 6 {
		require.NotContains(t, logs.String(), secret(i))
	}
}

func TestSweep_DeadLettersEveryMalformedShapeWithItsReason(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 3, "")...)
	want := putMalformed(t, awstest.DynamoDB(t), h.store.Table(), h.store.Shards(), "bad-", h.clock.Now())

	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, res.Delivered)
	require.Equal(t, len(want), res.DeadLettered)
	for key, reason := range want {
		got, _ := h.store.Get(context.Background(), key) // still malformed, and says so
		require.NotNil(t, got, key)
		require.Equal(t, outbox.StatusFailed, got.Status, key)
		require.Contains(t, got.LastError, "malformed: "+reason, key)
		require.NotEmpty(t, got.Errors, key)
	}
	// Nothing is left in the due index: no later sweep pays for any of them.
	res, err = h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Claimed+res.Conflicts+res.Errors+res.DeadLettered, "%+v", res)
}
