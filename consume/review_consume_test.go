package consume_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Adversarial review of package consume (issue 26): fifteen attacks by a
// reviewer who had not seen the package. Three broke it and were fixed:
// Idempotency wrote its record with the caller's ended context (an effect
// that ran could run again; a failed one held its retry for the whole
// hold), and a Poller.Wait under a second became a short poll.

func reviewGet(t *testing.T, table, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

// Places at the top of int64: passing a gap of nearly MaxInt64 places and
// applying MaxInt64 itself; a late copy of place 1 is told as passed.
func TestReview_InboxExtremePlaces(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapPass)
	ctx := context.Background()
	apply := func(m consume.Message) error { return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)) }
	require.NoError(t, apply(ordered("kmax-1", math.MaxInt64-1)))
	require.NoError(t, apply(ordered("kmax", math.MaxInt64)))
	require.ErrorIs(t, apply(ordered("kmax", math.MaxInt64)), consume.ErrDuplicate)
	err := apply(ordered("k1", 1))
	require.ErrorIs(t, err, consume.ErrPassed)
	var oe *consume.OrderError
	require.ErrorAs(t, err, &oe)
	require.EqualValues(t, int64(math.MaxInt64), oe.Cursor)
	cur := reviewGet(t, table, "cursor ledger g")
	require.Equal(t, strconv.FormatInt(math.MaxInt64-2, 10), cur["skipped"].(*types.AttributeValueMemberN).Value)
	_, history := account(t, table, "a")
	require.Equal(t, []string{"kmax-1", "kmax"}, history)
}

// Groups and keys that differ only by spaces, unicode, or a prefix keep
// separate cursors and inbox items.
func TestReview_InboxUnusualGroupsAndKeysDoNotCollide(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	groups := []string{"g", "g ", " g", "g h", "g\th", "ü", "u\u0308", "𝄞", "cursor ledger g"}
	for _, g := range groups {
		m := consume.Message{Key: "k " + g, Group: g, Seq: 1, Attempt: 1}
		require.NoError(t, in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)), "group %q", g)
	}
	for _, g := range groups {
		m := consume.Message{Key: "k2 " + g, Group: g, Seq: 2, Attempt: 1}
		require.NoError(t, in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)), "group %q", g)
	}
	bal, _ := account(t, table, "a")
	require.Equal(t, 2*len(groups), bal)
	_, err := in.TransactItems(consume.Message{Key: "", Attempt: 1})
	require.Error(t, err)
}

// A consumer that runs its own transactions (nil API): a late copy of a
// passed place must read as ErrPassed, not as a gap.
func TestReview_InboxNilAPIClassifiesALateCopyAsPassed(t *testing.T) {
	t.Parallel()
	full, table := newInbox(t, consume.GapPass)
	ctx := context.Background()
	require.NoError(t, full.Apply(ctx, ordered("k1", 1)))
	require.NoError(t, full.Apply(ctx, ordered("k4", 4)))
	own, err := consume.NewInbox(nil, consume.InboxConfig{Table: table, Consumer: "ledger", Gaps: consume.GapPass})
	require.NoError(t, err)
	api := awstest.DynamoDB(t)
	for _, m := range []consume.Message{ordered("k2", 2), ordered("k1again", 1)} {
		items, err := own.TransactItems(m)
		require.NoError(t, err)
		_, err = api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		err = own.Classify(ctx, m, items, err)
		require.ErrorIs(t, err, consume.ErrPassed, "place %d", m.Seq)
	}
}

// Concurrent copies of one message: the effect runs once.
func TestReview_IdempotencyConcurrentCopiesRunTheEffectOnce(t *testing.T) {
	t.Parallel()
	idem, _ := newIdempotency(t)
	ctx := context.Background()
	m := consume.Message{Key: "k1", Attempt: 1}
	var runs atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = idem.Do(ctx, m, func(context.Context) error { runs.Add(1); time.Sleep(500 * time.Millisecond); return nil })
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, runs.Load())
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.True(t, errors.Is(err, consume.ErrInProgress) || errors.Is(err, consume.ErrDuplicate), "%v", err)
	}
	require.Equal(t, 1, ok)
}

// An abandoned, expired hold taken over by several copies at once: one runs.
func TestReview_IdempotencyConcurrentTakeoverOfAnExpiredHold(t *testing.T) {
	t.Parallel()
	idem, table := newIdempotency(t)
	ctx := context.Background()
	m := consume.Message{Key: "k1", Attempt: 1}
	// Abandon a hold: the effect "crashes" by never completing; simulate by
	// an effect that itself starts the copies with a clock past the hold.
	later, err := consume.NewIdempotency(awstest.DynamoDB(t), consume.IdempotencyConfig{Table: table, Consumer: "mailer", Hold: time.Minute})
	require.NoError(t, err)
	consume.SetNow(later, func() time.Time { return time.Now().Add(2 * time.Minute) })
	var runs atomic.Int32
	_ = idem.Do(ctx, m, func(ctx context.Context) error {
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				_ = later.Do(ctx, m, func(context.Context) error { runs.Add(1); time.Sleep(300 * time.Millisecond); return nil })
			})
		}
		wg.Wait()
		return nil
	})
	require.EqualValues(t, 1, runs.Load())
}

// The hold's boundary: a copy exactly at held_until is still refused; one
// millisecond later it takes over.
func TestReview_IdempotencyHoldBoundary(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	ctx := context.Background()
	t0 := time.UnixMilli(time.Now().UnixMilli())
	mk := func(at time.Time) *consume.Idempotency {
		i, err := consume.NewIdempotency(awstest.DynamoDB(t), consume.IdempotencyConfig{Table: table, Consumer: "c", Hold: time.Second})
		require.NoError(t, err)
		consume.SetNow(i, func() time.Time { return at })
		return i
	}
	m := consume.Message{Key: "k", Attempt: 1}
	var inner error
	var runs atomic.Int32
	err := mk(t0).Do(ctx, m, func(ctx context.Context) error {
		require.ErrorIs(t, mk(t0.Add(time.Second)).Do(ctx, m, func(context.Context) error { runs.Add(1); return nil }), consume.ErrInProgress)
		inner = mk(t0.Add(time.Second+time.Millisecond)).Do(ctx, m, func(context.Context) error { runs.Add(1); return nil })
		return nil
	})
	require.NoError(t, inner)
	require.ErrorIs(t, err, consume.ErrHoldLost)
	require.EqualValues(t, 1, runs.Load())
}

// TTL arithmetic: an in-progress record's expiry is after its hold; a
// completed one's is now+TTL, or absent with TTL 0.
func TestReview_IdempotencyExpiryArithmetic(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	ctx := context.Background()
	t0 := time.Unix(1_900_000_000, 999_000_000)
	for _, ttl := range []time.Duration{0, time.Millisecond, time.Hour} {
		i, err := consume.NewIdempotency(awstest.DynamoDB(t), consume.IdempotencyConfig{Table: table, Consumer: "c", Hold: 1500 * time.Millisecond, TTL: ttl})
		require.NoError(t, err)
		consume.SetNow(i, func() time.Time { return t0 })
		key := "k" + ttl.String()
		require.NoError(t, i.Do(ctx, consume.Message{Key: key, Attempt: 1}, func(context.Context) error {
			rec := reviewGet(t, table, "idempotency c "+key)
			held, _ := strconv.ParseInt(rec["held_until"].(*types.AttributeValueMemberN).Value, 10, 64)
			exp, _ := strconv.ParseInt(rec["expires_at"].(*types.AttributeValueMemberN).Value, 10, 64)
			require.Equal(t, t0.Add(1500*time.Millisecond).UnixMilli(), held)
			require.Greater(t, exp*1000, held, "ttl %v: the record must not expire while held", ttl)
			return nil
		}))
		rec := reviewGet(t, table, "idempotency c "+key)
		require.Equal(t, "completed", rec["status"].(*types.AttributeValueMemberS).Value)
		if ttl == 0 {
			require.NotContains(t, rec, "expires_at")
		} else {
			exp, _ := strconv.ParseInt(rec["expires_at"].(*types.AttributeValueMemberN).Value, 10, 64)
			require.GreaterOrEqual(t, exp, t0.Unix(), "ttl %v", ttl)
		}
		require.ErrorIs(t, i.Do(ctx, consume.Message{Key: key, Attempt: 1}, func(context.Context) error { return nil }), consume.ErrDuplicate)
	}
}

// A FIFO group whose first message cannot be decoded, and a group named
// like another on a standard queue.
func TestReview_HandlerFIFOGroupFailureRules(t *testing.T) {
	t.Parallel()
	bad := events.SQSMessage{MessageId: "id-bad", Body: "not outflow", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q.fifo", Attributes: map[string]string{"MessageGroupId": "a"}}
	recs := []events.SQSMessage{bad, record("b1", "b"), record("a2", "a"), record("b2", "b"), record("a3", "a"), record("s1", ""), record("s2", "")}
	var applied []string
	h := consume.Handler{Apply: func(_ context.Context, m consume.Message) error {
		applied = append(applied, m.Key)
		if m.Key == "b2" || m.Key == "s1" {
			return errors.New("boom")
		}
		return nil
	}}
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: recs})
	require.NoError(t, err)
	require.Equal(t, []string{"b1", "b2", "s1", "s2"}, applied)
	require.Equal(t, []string{"id-bad", "id-a2", "id-b2", "id-a3", "id-s1"}, failedIDs(resp))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	applied = nil
	resp, err = h.Handle(ctx, events.SQSEvent{Records: recs[1:3]})
	require.NoError(t, err)
	require.Empty(t, applied)
	require.Len(t, resp.BatchItemFailures, 2)
}

// Decoding odd inputs: no panic, a typed error.
func TestReview_DecodeOddInputsGiveTypedErrors(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	attrs := func(kv ...string) map[string]sqstypes.MessageAttributeValue {
		out := map[string]sqstypes.MessageAttributeValue{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = sqstypes.MessageAttributeValue{DataType: s("String"), StringValue: s(kv[i+1])}
		}
		return out
	}
	cases := []sqstypes.Message{
		{},
		{Body: s("null")},
		{Body: s(`{"detail-type":null,"detail":{}}`)},
		{Body: s(`{"detail-type":"x","detail":null}`)},
		{Body: s(`{"detail-type":"x","detail":{"outflow":null}}`)},
		{Body: s(`{"detail-type":"x","detail":{"outflow":{"key":"k","attempt":1e30}}}`)},
		{Body: s(`{"detail-type":"x","detail":{"outflow":{"key":"k","attempt":-1}}}`)},
		{Body: s(`{"detail-type":"x","detail":{"a":1 "outflow":{"key":"k","attempt":1}}}`)},
		{Body: s(`{"detail-type":"x","detail":{"outflow":{"key":"k","attempt":1},}}`)},
		{Body: s(`{"Type":"Notification","Message":null}`)},
		{Body: s(`{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"Binary","Value":"aw=="}}}`)},
		{Body: s(`{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":""},"outflow.attempt":{"Type":"Number","Value":"1"}}}`)},
		{Body: s(`{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k"},"outflow.attempt":{"Type":"Number","Value":"1"},"outflow.seq":{"Type":"Number","Value":"0"}}}`)},
		{MessageAttributes: map[string]sqstypes.MessageAttributeValue{"outflow.key": {DataType: s("String")}}},
		{MessageAttributes: attrs("outflow.key", "k", "outflow.attempt", "99999999999999999999")},
		{MessageAttributes: attrs("outflow.key", "k", "outflow.attempt", "1", "outflow.seq", "9223372036854775808")},
		{MessageAttributes: attrs("outflow.key", "k", "outflow.attempt", "1", "outflow.seq", "-1")},
		{MessageAttributes: attrs("outflow.key", "k", "outflow.attempt", "1", "outflow.seq", "1.0")},
		{MessageAttributes: attrs("outflow.key", "k", "outflow.attempt", "1", "outflow.encoding", "base64"), Body: s("!!!")},
		{MessageAttributes: attrs("outflow.key", "k", "outflow.attempt", "1", "outflow.encoding", "gzip"), Body: s("x")},
	}
	for i, c := range cases {
		require.NotPanics(t, func() {
			_, err := consume.FromSQS(c)
			var de *consume.DecodeError
			require.ErrorAs(t, err, &de, "case %d", i)
			require.True(t, errors.Is(err, consume.ErrMalformed) || errors.Is(err, consume.ErrNotOutflow), "case %d: %v", i, err)
		}, "case %d", i)
	}
}

// Shutdown in the middle of a FIFO group: the started message finishes
// and is deleted; the group's later messages are neither applied nor
// deleted.
func TestReview_PollerShutdownMidGroup(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, true)
	var rows []outbox.Row
	for i := int64(1); i <= 3; i++ {
		rows = append(rows, outbox.Row{Key: "a" + strconv.FormatInt(i, 10), Group: "a", Seq: i, Attempt: 1, Payload: []byte("p")})
	}
	rows = append(rows, outbox.Row{Key: "b1", Group: "b", Seq: 1, Attempt: 1, Payload: []byte("p")})
	deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "events.fifo", url, rows...)
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var applied []string
	p := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: 5 * time.Second, Wait: time.Second, Concurrency: 1,
		Apply: func(_ context.Context, m consume.Message) error {
			mu.Lock()
			applied = append(applied, m.Key)
			mu.Unlock()
			if m.Key == "a1" {
				close(started)
				<-release
				return nil
			}
			if m.Key == "b1" {
				return errors.New("b1 fails at shutdown")
			}
			return nil
		}}
	stop := runPoller(t, p)
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(300 * time.Millisecond)
	close(release)
	require.NoError(t, <-stopped)
	mu.Lock()
	require.Equal(t, []string{"a1"}, applied, "nothing started after shutdown")
	mu.Unlock()
	got := awstest.ReceiveKeys(t, url, 3, 20*time.Second)
	require.ElementsMatch(t, []string{"a2", "a3", "b1"}, got, "a1 deleted, the rest left")
}

// Concurrency bounds the groups run at once; a group never runs two at
// once.
func TestReview_PollerBoundsConcurrency(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, true)
	var rows []outbox.Row
	for g := range 5 {
		for i := int64(1); i <= 2; i++ {
			key := "g" + strconv.Itoa(g) + "-" + strconv.FormatInt(i, 10)
			rows = append(rows, outbox.Row{Key: key, Group: "g" + strconv.Itoa(g), Seq: i, Attempt: 1, Payload: []byte("p")})
		}
	}
	deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "events.fifo", url, rows...)
	var inFlight, maxInFlight atomic.Int32
	var mu sync.Mutex
	perGroup := map[string]int{}
	bad := atomic.Bool{}
	done := make(chan string, 20)
	p := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: 10 * time.Second, Wait: time.Second, Concurrency: 2,
		Apply: func(_ context.Context, m consume.Message) error {
			n := inFlight.Add(1)
			for { // record max
				cur := maxInFlight.Load()
				if n <= cur || maxInFlight.CompareAndSwap(cur, n) {
					break
				}
			}
			mu.Lock()
			perGroup[m.Group]++
			if perGroup[m.Group] > 1 {
				bad.Store(true)
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			perGroup[m.Group]--
			mu.Unlock()
			inFlight.Add(-1)
			done <- m.Key
			return nil
		}}
	stop := runPoller(t, p)
	for range rows {
		select {
		case <-done:
		case <-time.After(time.Minute):
			require.Fail(t, "stalled")
		}
	}
	require.NoError(t, stop())
	require.LessOrEqual(t, maxInFlight.Load(), int32(2))
	require.False(t, bad.Load())
}

var _ = sqs.ReceiveMessageInput{}

// countingReceives counts ReceiveMessage calls.
type countingReceives struct {
	*sqs.Client
	receives atomic.Int32
}

func (c *countingReceives) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.receives.Add(1)
	return c.Client.ReceiveMessage(ctx, in, opts...)
}

// A sub-second Wait must still long-poll, not spin on short polls.
func TestReview_PollerSubSecondWaitDoesNotSpin(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, false)
	api := &countingReceives{Client: awstest.SQS(t)}
	p := &consume.Poller{API: api, QueueURL: url, Wait: 500 * time.Millisecond,
		Apply: func(context.Context, consume.Message) error { return nil }}
	stop := runPoller(t, p)
	time.Sleep(2 * time.Second)
	require.NoError(t, stop())
	require.LessOrEqual(t, api.receives.Load(), int32(10), "an empty queue polled with a 500ms wait for 2s")
}

// The effect succeeded, then the caller's context was cancelled (a
// shutdown signal) before Do wrote the completed record: the effect must
// not run again for a later copy.
func TestReview_IdempotencyCompletesAnEffectThatRanWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	idem, err := consume.NewIdempotency(awstest.DynamoDB(t), consume.IdempotencyConfig{Table: table, Consumer: "mailer", Hold: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	later, err := consume.NewIdempotency(awstest.DynamoDB(t), consume.IdempotencyConfig{Table: table, Consumer: "mailer", Hold: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	consume.SetNow(later, func() time.Time { return time.Now().Add(2 * time.Minute) }) // past the first hold
	m := consume.Message{Key: "k1", Attempt: 1}
	var runs atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	err = idem.Do(ctx, m, func(context.Context) error {
		runs.Add(1) // the mail is sent
		cancel()    // and the process is told to stop
		return nil
	})
	t.Logf("first Do: %v", err)
	err = later.Do(context.Background(), m, func(context.Context) error { runs.Add(1); return nil })
	t.Logf("later copy: %v", err)
	require.EqualValues(t, 1, runs.Load(), "the side effect ran twice")
}

// An effect that fails because its context ended releases its record, so
// the retry runs at once (docs/consuming.md: "An effect that fails deletes
// its record, so the retry runs at once").
func TestReview_IdempotencyReleasesWhenTheEffectFailsOnAnEndedContext(t *testing.T) {
	t.Parallel()
	idem, _ := newIdempotency(t)
	m := consume.Message{Key: "k1", Attempt: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := idem.Do(ctx, m, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var runs atomic.Int32
	require.NoError(t, idem.Do(context.Background(), m, func(context.Context) error { runs.Add(1); return nil }),
		"the retry waits out the whole hold")
	require.EqualValues(t, 1, runs.Load())
}

// A group waiting for a slot behind a slow group, with a fractional
// visibility timeout: no message of the batch becomes visible to another
// consumer while the batch runs.
func TestReview_PollerKeepsWaitingGroupsInvisible(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, false)
	deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "q", url,
		outbox.Row{Key: "slow", Attempt: 1, Payload: []byte("p")}, outbox.Row{Key: "next", Attempt: 1, Payload: []byte("p")})
	var runs sync.Map
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	p := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: 1500 * time.Millisecond, Wait: time.Second, Concurrency: 1,
		Apply: func(_ context.Context, m consume.Message) error {
			n, _ := runs.LoadOrStore(m.Key, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			started <- struct{}{}
			if m.Key == "slow" || m.Key == "next" {
				select {
				case <-release:
				case <-time.After(4 * time.Second):
				}
			}
			return nil
		}}
	stop := runPoller(t, p)
	<-started
	// Another consumer polls while the first message runs for 4s.
	deadline := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(deadline) {
		out, err := awstest.SQS(t).ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 0, VisibilityTimeout: 0})
		require.NoError(t, err)
		require.Empty(t, out.Messages, "a message of the running batch became visible")
		time.Sleep(200 * time.Millisecond)
	}
	close(release)
	require.NoError(t, stop())
}
