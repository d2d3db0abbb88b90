package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/sdkhttp"
	"github.com/outflowhq/outflow/internal/target"
)

// ledger records what really happened, below the faults: every claim,
// send and successful settle, in one global order.
type ledger struct {
	mu     sync.Mutex
	seq    int
	claims map[string][]claim // key -> claims, in order
	// sends holds the seq of each send the target (SQS, SNS, EventBridge)
	// accepted; maybe, of each send whose outcome is unknown (the call
	// failed or timed out after it may have reached the target), so the
	// target may have accepted it.
	sends, maybe map[string][]int
	settles      map[string][]settle // key -> successful settles
	// unsure holds the final settles whose call failed without the
	// table's answer (a crash cancelled it mid-flight, say): the write may
	// have applied, unseen. handOver resolves them with a read (see
	// resolve) before it judges a successor.
	unsure map[string][]settle
	// calls counts the batch calls (SendMessageBatch, PublishBatch,
	// PutEvents) that carried each key at each attempt: one claim, one call (SDK retries stay inside it).
	calls map[string]int
	// handed holds the claim tokens the engine handed to the deliverer.
	handed map[string]bool
	// unclaimed holds the seq of each hand-over of a row the wake sent
	// without a claim, by key.
	unclaimed map[string][]int
	bad       []string // violations seen as they happened
	// keys serializes each key's writes with their records (a *sync.Mutex
	// per key), so the ledger's order of a row's transitions is the
	// table's: a release makes the row claimable at once, and without it
	// another worker's claim could be recorded before the release that
	// let it in (a soak under a load of 20 flagged exactly that).
	keys sync.Map
}

// hold locks key's writes until the returned func is called.
func (l *ledger) hold(key string) func() {
	m, _ := l.keys.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

type claim struct {
	seq   int
	token string
}

type settle struct {
	seq   int
	op    string
	token string
	final bool
}

func newLedger() *ledger {
	return &ledger{claims: map[string][]claim{}, sends: map[string][]int{}, maybe: map[string][]int{}, settles: map[string][]settle{}, unsure: map[string][]settle{},
		calls: map[string]int{}, handed: map[string]bool{}, unclaimed: map[string][]int{}}
}

// finalSettle is the row's final settle (done, dead letter, expire,
// quarantine), if it has one. Call it with l.mu held.
func (l *ledger) finalSettle(key string) (settle, bool) {
	i := slices.IndexFunc(l.settles[key], func(st settle) bool { return st.final })
	if i < 0 {
		return settle{}, false
	}
	return l.settles[key][i], true
}

func (l *ledger) next() int { l.seq++; return l.seq }

// unsettled returns the rows whose latest claim has no settle yet: held by
// some worker, perhaps sent.
func (l *ledger) unsettled() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []string
	for key, claims := range l.claims {
		last := claims[len(claims)-1].token
		if !slices.ContainsFunc(l.settles[key], func(st settle) bool { return st.token == last || st.final }) {
			keys = append(keys, key)
		}
	}
	return keys
}

// digest is a hash of what the ledger recorded, key by key: the place in
// the one order of every claim, send and settle (with its op). Two runs
// with the same digest made the same requests in the same order; tokens,
// which are random, are left out.
func (l *ledger) digest() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := slices.Concat(slices.Collect(maps.Keys(l.claims)), slices.Collect(maps.Keys(l.settles)),
		slices.Collect(maps.Keys(l.sends)), slices.Collect(maps.Keys(l.maybe)))
	slices.Sort(keys)
	h := fnv.New64a()
	for _, key := range slices.Compact(keys) {
		fmt.Fprintf(h, "%s|claims", key)
		for _, c := range l.claims[key] {
			fmt.Fprintf(h, " %d", c.seq)
		}
		fmt.Fprintf(h, "|sends %v|maybe %v|settles", l.sends[key], l.maybe[key])
		for _, st := range l.settles[key] {
			fmt.Fprintf(h, " %d %s %t", st.seq, st.op, st.final)
		}
		fmt.Fprintln(h)
	}
	return fmt.Sprintf("%016x (%d events)", h.Sum64(), l.seq)
}

// recStore records the real store's successful transitions.
type recStore struct {
	outbox.Store
	l *ledger
}

func (s recStore) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, max int) (outbox.Row, error) {
	defer s.l.hold(key)()
	row, err := s.Store.Claim(ctx, key, now, lease, max)
	if err == nil {
		s.l.mu.Lock()
		s.l.claims[key] = append(s.l.claims[key], claim{seq: s.l.next(), token: row.Token})
		if st, ok := s.l.finalSettle(key); ok {
			s.l.bad = append(s.l.bad, fmt.Sprintf("%s claimed after its final settle (%s)", key, st.op))
		}
		if row.Attempt > max {
			s.l.bad = append(s.l.bad, fmt.Sprintf("%s claimed at attempt %d > %d", key, row.Attempt, max))
		}
		s.l.mu.Unlock()
	}
	return row, err
}

func (s recStore) settled(op string, row outbox.Row, final bool, err error) error {
	if err != nil {
		if final {
			s.l.recordUnsure(row.Key, op, row.Token)
		}
		return err
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	claims := s.l.claims[row.Key]
	switch {
	case row.Unclaimed && len(claims) > 0:
		// The settle of a row sent unclaimed holds only while no claim
		// ever wrote the row.
		s.l.bad = append(s.l.bad, fmt.Sprintf("%s: the wake's unclaimed %s succeeded after a claim", row.Key, op))
	case row.Unclaimed:
	case len(claims) == 0 || claims[len(claims)-1].token != row.Token:
		s.l.bad = append(s.l.bad, fmt.Sprintf("%s: %s succeeded with a token that is not the latest claim", row.Key, op))
	}
	s.l.settles[row.Key] = append(s.l.settles[row.Key], settle{seq: s.l.next(), op: op, token: row.Token, final: final})
	return nil
}

func (s recStore) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	defer s.l.hold(row.Key)()
	return s.settled("done", row, true, s.Store.Done(ctx, row, now))
}

func (s recStore) Retry(ctx context.Context, row outbox.Row, due time.Time, h []outbox.AttemptError) error {
	defer s.l.hold(row.Key)()
	return s.settled("retry", row, false, s.Store.Retry(ctx, row, due, h))
}

func (s recStore) DeadLetter(ctx context.Context, row outbox.Row, now time.Time, h []outbox.AttemptError) error {
	defer s.l.hold(row.Key)()
	return s.settled("dead-letter", row, true, s.Store.DeadLetter(ctx, row, now, h))
}

func (s recStore) Release(ctx context.Context, row outbox.Row) error {
	defer s.l.hold(row.Key)()
	return s.settled("release", row, false, s.Store.Release(ctx, row))
}

// Expire and Quarantine settle a row for good without a claim of their
// own (a lapsed claim, a pending row past its budget, an unreadable item),
// so they are recorded without the token check.
func (s recStore) Expire(ctx context.Context, row outbox.Row, now time.Time, max int, h []outbox.AttemptError) error {
	defer s.l.hold(row.Key)()
	err := s.Store.Expire(ctx, row, now, max, h)
	if err == nil {
		s.l.recordFinal(row.Key, "expire")
	} else {
		s.l.recordUnsure(row.Key, "expire", "")
	}
	return err
}

func (s recStore) Quarantine(ctx context.Context, key string, now time.Time, reason string) error {
	defer s.l.hold(key)()
	err := s.Store.Quarantine(ctx, key, now, reason)
	if err == nil {
		s.l.recordFinal(key, "quarantine")
	} else {
		s.l.recordUnsure(key, "quarantine", "")
	}
	return err
}

// unsettledUnclaimed is the keys among keys that the wake handed over
// unclaimed and whose unclaimed settle did not apply: they may be sent
// again, by a sweep, or may have been sent after a sweep's claim.
func (l *ledger) unsettledUnclaimed(keys []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, k := range keys {
		if len(l.unclaimed[k]) > 0 && !slices.ContainsFunc(l.settles[k], func(st settle) bool { return st.token == "" && st.op != "expire" && st.op != "quarantine" }) {
			out = append(out, k)
		}
	}
	return out
}

// recordUnsure notes a final settle of key whose call failed: it may
// have applied anyway (see ledger.unsure).
func (l *ledger) recordUnsure(key, op, token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unsure[key] = append(l.unsure[key], settle{op: op, token: token, final: true})
}

// resolve records the final settle of key that applied unseen, if the
// table shows one did: the row is gone (only a done deletes it) or failed
// (a dead letter, an expire or a quarantine), while the ledger holds no
// final settle of it and an unsure one of that kind. A crash cancels a
// worker's context while its other calls are on the wire, and moto may
// apply a write whose caller saw only "context canceled" (seed 515886288:
// a done deleted the predecessor, another worker read it gone and handed
// its successor over, and the ledger, which had recorded no done, called
// that a reordering). Both outcomes are for good in the soak (no redrive
// or purge), so a read after the engine's shows what the engine's saw.
func (l *ledger) resolve(ctx context.Context, key string, link func(context.Context, string) (outbox.Link, error)) {
	l.mu.Lock()
	_, final := l.finalSettle(key)
	pending := len(l.unsure[key]) > 0
	l.mu.Unlock()
	if final || !pending || link == nil {
		return
	}
	got, err := link(context.WithoutCancel(ctx), key)
	if err != nil {
		return // judged on what the ledger saw
	}
	applied := func(st settle) bool {
		switch {
		case !got.Found:
			return st.op == "done"
		case got.Status == outbox.StatusFailed:
			return st.op != "done"
		}
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, final := l.finalSettle(key); final {
		return
	}
	if i := slices.IndexFunc(l.unsure[key], applied); i >= 0 {
		st := l.unsure[key][i]
		st.seq = l.next()
		l.settles[key] = append(l.settles[key], st)
	}
}

func (l *ledger) recordFinal(key, op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settles[key] = append(l.settles[key], settle{seq: l.next(), op: op, final: true})
}

// handOver checks each row the engine hands to the deliverer, as it is
// handed: its token is the row's latest claim, that claim is not settled,
// the row has no final settle, and no earlier hand-over used the token.
// A row whose lease no longer covers a send (outbox.MaySend: the clock
// jumped, a stall, between the engine's check and here) is not checked:
// another worker may hold it by now, and the fence keeps it from being
// sent.
//
// A row of an ordered group is handed over only once its predecessor has
// its final settle: done, or, on a route whose dead head is skipped, a
// dead letter.
type handOver struct {
	next    outbox.Deliverer
	l       *ledger
	ordered map[string]outbox.DeadHead
	// link reads a row from the table, to resolve a predecessor's unsure
	// final settle (see ledger.resolve).
	link func(context.Context, string) (outbox.Link, error)
}

// prevSettled reports whether r's predecessor lets it go. Call it with
// h.l.mu held.
func (h handOver) prevSettled(r outbox.Row) bool {
	if r.Prev == "" {
		return true
	}
	st, ok := h.l.finalSettle(r.Prev)
	return ok && (st.op == "done" || h.ordered[r.Queue] == outbox.DeadHeadSkip)
}

func (h handOver) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	for _, r := range rows {
		if r.Prev != "" && !r.Unclaimed {
			h.l.resolve(ctx, r.Prev, h.link)
		}
	}
	h.l.mu.Lock()
	for _, r := range rows {
		if r.Unclaimed {
			// The wake's send of a fresh unordered row, unfenced: it may
			// race a sweep that claimed the row after the grace (see
			// sentUnderClaim and the soak's duplicate windows).
			h.l.unclaimed[r.Key] = append(h.l.unclaimed[r.Key], h.l.next())
			continue
		}
		if !outbox.MaySend(ctx, r) {
			continue
		}
		claims := h.l.claims[r.Key]
		_, final := h.l.finalSettle(r.Key)
		switch {
		case len(claims) == 0 || claims[len(claims)-1].token != r.Token:
			h.l.bad = append(h.l.bad, r.Key+": handed to the deliverer under a token that is not its latest claim")
		case slices.ContainsFunc(h.l.settles[r.Key], func(st settle) bool { return st.token == r.Token }):
			h.l.bad = append(h.l.bad, r.Key+": handed to the deliverer after its claim was settled")
		case final:
			h.l.bad = append(h.l.bad, r.Key+": handed to the deliverer after its final settle")
		case h.l.handed[r.Token]:
			h.l.bad = append(h.l.bad, r.Key+": handed to the deliverer twice under one claim")
		case !h.prevSettled(r):
			h.l.bad = append(h.l.bad, r.Key+": handed to the deliverer before its predecessor "+r.Prev+" was settled")
		}
		h.l.handed[r.Token] = true
	}
	h.l.mu.Unlock()
	return h.next.Deliver(ctx, queue, rows)
}

// recSQS, recSNS and recEvents record sends on the wire below the faults:
// those the service accepted, and those whose outcome is unknown. Each sees
// every attempt the SDK makes, retries included: an attempt that failed
// without the service's answer (a crash cancelled it, or it timed out) may
// still have reached it.
type recSQS struct {
	next delivery.SQSAPI
	l    *ledger
	plan *faults.Plan
}

func (a recSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	keys := make([]string, len(in.Entries))
	byID := make(map[string]string, len(in.Entries))
	for i, e := range in.Entries {
		keys[i] = aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue)
		byID[aws.ToString(e.Id)] = keys[i]
		a.l.oneCall(keys[i], callAttempt(aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue), e.MessageAttributes[target.AttrClosed].StringValue))
	}
	watch := a.l.watchAttempts(keys, a.plan)
	out, err := a.next.SendMessageBatch(ctx, in, append(opts, func(o *sqs.Options) { o.APIOptions = append(slices.Clip(o.APIOptions), watch) })...)
	if err != nil {
		return out, err
	}
	accepted := make([]string, 0, len(out.Successful))
	for _, ok := range out.Successful {
		accepted = append(accepted, byID[aws.ToString(ok.Id)])
	}
	a.l.record(a.l.sends, accepted)
	return out, nil
}

type recSNS struct {
	next delivery.SNSAPI
	l    *ledger
	plan *faults.Plan
}

func (a recSNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	keys := make([]string, len(in.PublishBatchRequestEntries))
	byID := make(map[string]string, len(keys))
	for i, e := range in.PublishBatchRequestEntries {
		key, attempt := faults.SNSSite(e)
		keys[i], byID[aws.ToString(e.Id)] = key, key
		a.l.oneCall(key, attempt)
	}
	watch := a.l.watchAttempts(keys, a.plan)
	out, err := a.next.PublishBatch(ctx, in, append(opts, func(o *sns.Options) { o.APIOptions = append(slices.Clip(o.APIOptions), watch) })...)
	if err != nil {
		return out, err
	}
	accepted := make([]string, 0, len(out.Successful))
	for _, ok := range out.Successful {
		accepted = append(accepted, byID[aws.ToString(ok.Id)])
	}
	a.l.record(a.l.sends, accepted)
	return out, nil
}

type recEvents struct {
	next delivery.EventBridgeAPI
	l    *ledger
	plan *faults.Plan
}

func (a recEvents) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	keys := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		key, attempt := faults.EventSite(e)
		keys[i] = key
		a.l.oneCall(key, attempt)
	}
	watch := a.l.watchAttempts(keys, a.plan)
	out, err := a.next.PutEvents(ctx, in, append(opts, func(o *eventbridge.Options) { o.APIOptions = append(slices.Clip(o.APIOptions), watch) })...)
	if err != nil {
		return out, err
	}
	// PutEvents answers entry by entry, in the order asked.
	accepted := make([]string, 0, len(out.Entries))
	for i, r := range out.Entries {
		if i < len(keys) && r.ErrorCode == nil {
			accepted = append(accepted, keys[i])
		}
	}
	a.l.record(a.l.sends, accepted)
	return out, nil
}

// callAttempt is the attempt a message's batch call is counted under: a
// closing message's own, apart from its row's, as the fault plan draws
// them (faults.SNSSite; the SQS sites alike). The message closing a place
// (outflow.closed) goes under its row's key, and Store.Close gives the row
// a fresh budget (attempt 0), so it counts its attempts from 1 again: a
// row of a skip route sent at attempt 1, then refused for good at a later
// attempt, has its place closed by a message sent at attempt 1 too. Those
// are two claims and two messages (the closing one has its own
// deduplication id), not one attempt sent in two calls (seed 755815584,
// soak-000002, flagged so before).
func callAttempt(attempt string, closed *string) string {
	if closed == nil {
		return attempt
	}
	return attempt + " closed"
}

// oneCall counts a batch call that carries key at attempt: one claim, one
// call (the SDK's retries stay inside it), and one more at attempt 1 per
// unclaimed hand-over.
func (l *ledger) oneCall(key, attempt string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	site := key + " attempt " + attempt
	calls := 1
	if attempt == "1" {
		// The wake's unclaimed sends go as attempt 1, and so does the
		// first claim of a row whose unclaimed settle did not apply.
		calls += len(l.unclaimed[key])
	}
	if l.calls[site]++; l.calls[site] > calls {
		l.bad = append(l.bad, site+": sent in more than one batch call")
	}
}

// watchAttempts is an SDK option that records, at each attempt of a call
// carrying keys that fails without the service's refusal, a send of
// unknown outcome for every key.
func (l *ledger) watchAttempts(keys []string, plan *faults.Plan) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("soak-ledger", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil && !refusedBySQS(err) {
				l.record(l.maybe, keys)
				if ctx.Err() == nil {
					// Not a crash (the sweeper marks its own): a fault of
					// the wire, after which the service may hold the
					// message and the SDK or a later attempt send it again.
					for _, k := range keys {
						plan.MarkDuplicateWindow(k)
					}
				}
			}
			return out, md, err
		}), middleware.After)
	}
}

// refusedBySQS reports whether the service (SQS, SNS or EventBridge)
// answered err with a client error, so it accepted nothing. A request that got no answer has status 0.
func refusedBySQS(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500
}

// sentUnderClaim checks that every send of key, accepted or of unknown
// outcome, went out under a live claim: after a claim, before any settle
// of that claim, and before the row's final settle. A send after the
// wake's unclaimed hand-over of the row is not checked. Call it with l.mu
// held.
func (l *ledger) sentUnderClaim(key string) error {
	final, settled := l.finalSettle(key)
	for _, s := range slices.Concat(l.sends[key], l.maybe[key]) {
		if slices.ContainsFunc(l.unclaimed[key], func(h int) bool { return h < s }) {
			// After an unclaimed hand-over: that send needs no claim, and
			// may land after a sweep's (a duplicate in a window the soak
			// marks when the wake's settle did not apply).
			continue
		}
		if settled && final.seq < s {
			return fmt.Errorf("%s was sent (seq %d) after its final settle, %s (seq %d)", key, s, final.op, final.seq)
		}
		i := slices.IndexFunc(l.claims[key], func(c claim) bool { return c.seq > s })
		if i < 0 {
			i = len(l.claims[key])
		}
		if i == 0 {
			return fmt.Errorf("%s was sent (seq %d) before any claim", key, s)
		}
		c := l.claims[key][i-1]
		for _, st := range l.settles[key] {
			if st.token == c.token && st.seq < s {
				return fmt.Errorf("%s was sent (seq %d) after its claim was settled %s (seq %d)", key, s, st.op, st.seq)
			}
		}
	}
	return nil
}

// record appends the next seq to each key's list in m.
func (l *ledger) record(m map[string][]int, keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		m[k] = append(m[k], l.next())
	}
}

// lostAnswer is an HTTP transport whose requests reach the server but whose
// answers are lost, as when a crash cancels a call in flight.
type lostAnswer struct{ next http.RoundTripper }

func (l lostAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := l.next.RoundTrip(req)
	if err == nil {
		_ = res.Body.Close()
	}
	return nil, errors.New("connection reset after the request was sent")
}

func TestLedger_CountsASendWhoseAnswerWasLostAsPossiblyAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := awstest.NewQueue(t, false)
	lost := sqs.NewFromConfig(awstest.TestConfig(t), func(o *sqs.Options) {
		o.HTTPClient = sdkhttp.Client(&http.Client{Transport: lostAnswer{next: http.DefaultTransport}})
		o.RetryMaxAttempts = 1
	})
	led, plan := newLedger(), faults.NewPlan(1, nil)
	rec := recSQS{next: lost, l: led, plan: plan}
	_, err := rec.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.SendMessageBatchRequestEntry{{
		Id: aws.String("0"), MessageBody: aws.String("{}"),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{delivery.AttrKey: {DataType: aws.String("String"), StringValue: aws.String("k")}},
	}}})
	require.Error(t, err)

	got := awstest.Receive(t, url, 1, 10*time.Second)
	require.Len(t, got, 1, "the send reached SQS although its answer was lost")
	require.Empty(t, led.sends["k"], "no answer, so no send is known to be accepted")
	require.Len(t, led.maybe["k"], 1, "the send must count as possibly accepted, or its arrival looks like a double count")
	require.Equal(t, 1, plan.DuplicateWindows()["k"], "a lost answer opens a duplicate window: the row will be sent again")
}

// acceptAll is an SQS API that accepts every entry.
type acceptAll struct{}

func (acceptAll) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m" + aws.ToString(e.Id))})
	}
	return out, nil
}

// A row of a skip route reaches SQS at attempt 1 (its settle lost, say),
// is refused for good at attempt 2, before the wire, and its place is
// closed: Store.Close sets its attempt to 0, so the message closing its
// place goes at attempt 1 under the row's key. One call per claim still
// holds; the row's attempt 1 and the closing message's are two claims.
func TestLedger_CountsAClosingMessagesCallsApartFromItsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	led := newLedger()
	router, err := delivery.New(delivery.Clients{SQS: recSQS{next: acceptAll{}, l: led, plan: faults.NewPlan(1, nil)}},
		delivery.Routes{"ordered.fifo": "https://sqs.us-east-1.amazonaws.com/123456789012/ordered.fifo"}, 0)
	require.NoError(t, err)
	send := func(row outbox.Row) {
		t.Helper()
		require.Equal(t, []error{nil}, router.Deliver(ctx, row.Queue, []outbox.Row{row}))
	}
	row := outbox.Row{Key: "k", Queue: "ordered.fifo", Group: "g", Seq: 1, Payload: []byte(`{"n":1}`), Attempt: 1}
	send(row)
	closing := row
	closing.Closed = outbox.ClosedDeadLetter
	send(closing)
	require.Empty(t, led.bad, "the closing message's attempt 1 is not the row's")

	send(closing)
	require.Equal(t, []string{"k attempt 1 closed: sent in more than one batch call"}, led.bad,
		"one closing attempt in two calls is still flagged")
	send(row)
	require.Equal(t, "k attempt 1: sent in more than one batch call", led.bad[len(led.bad)-1], "and so is one row attempt")
}

func TestLedger_RefusesASendThatNoLiveClaimAllowed(t *testing.T) {
	t.Parallel()
	type event struct{ kind, token string } // claim, send, maybe, or a settle op
	cases := []struct {
		name   string
		events []event
		bad    string // what sentUnderClaim reports, or "" for none
	}{
		{"send under its claim", []event{{"claim", "t1"}, {"send", ""}, {"done", "t1"}}, ""},
		{"send of unknown outcome under its claim", []event{{"claim", "t1"}, {"maybe", ""}, {"retry", "t1"}}, ""},
		{"send under a new claim after a retry", []event{{"claim", "t1"}, {"send", ""}, {"retry", "t1"}, {"claim", "t2"}, {"send", ""}}, ""},
		{"send before any claim", []event{{"send", ""}, {"claim", "t1"}}, "before any claim"},
		{"send after the final settle", []event{{"claim", "t1"}, {"done", "t1"}, {"send", ""}}, "after its final settle, done"},
		{"send after a release", []event{{"claim", "t1"}, {"release", "t1"}, {"maybe", ""}}, "after its claim was settled release"},
		{"send after a retry, before the next claim", []event{{"claim", "t1"}, {"retry", "t1"}, {"send", ""}, {"claim", "t2"}}, "after its claim was settled retry"},
		{"send under a stale claim after the row expired", []event{{"claim", "t1"}, {"expire", ""}, {"maybe", ""}}, "after its final settle, expire"},
		{"send under a new claim after a dead letter", []event{{"claim", "t1"}, {"dead-letter", "t1"}, {"claim", "t2"}, {"send", ""}}, "after its final settle, dead-letter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger()
			for _, e := range tc.events {
				switch e.kind {
				case "claim":
					l.claims["k"] = append(l.claims["k"], claim{seq: l.next(), token: e.token})
				case "send":
					l.record(l.sends, []string{"k"})
				case "maybe":
					l.record(l.maybe, []string{"k"})
				default:
					final := e.kind != "retry" && e.kind != "release"
					l.settles["k"] = append(l.settles["k"], settle{seq: l.next(), op: e.kind, token: e.token, final: final})
				}
			}
			err := l.sentUnderClaim("k")
			if tc.bad == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.bad)
		})
	}
}

type nopDeliverer struct{}

func (nopDeliverer) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	return make([]error, len(rows))
}

func TestHandOver_RefusesARowWithoutItsOwnLiveClaim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ledger func(*ledger)
		tokens []string // handed over, in order, for key k
		prev   string   // k's predecessor in its ordered group, on a block route
		bad    string
		// table is the predecessor as the table holds it, read to resolve
		// an unsure settle (nil: not read).
		table *outbox.Link
	}{
		{"its own live claim", func(l *ledger) { l.claims["k"] = []claim{{1, "t1"}} }, []string{"t1"}, "", "", nil},
		{"no claim at all", func(*ledger) {}, []string{"t1"}, "", "not its latest claim", nil},
		{"another worker's newer claim", func(l *ledger) { l.claims["k"] = []claim{{1, "t1"}, {2, "t2"}} }, []string{"t1"}, "", "not its latest claim", nil},
		{"a claim already settled", func(l *ledger) {
			l.claims["k"] = []claim{{1, "t1"}}
			l.settles["k"] = []settle{{seq: 2, op: "retry", token: "t1"}}
		}, []string{"t1"}, "", "after its claim was settled", nil},
		{"a row settled for good", func(l *ledger) {
			l.claims["k"] = []claim{{1, "t1"}, {3, "t2"}}
			l.settles["k"] = []settle{{seq: 2, op: "expire", final: true}}
		}, []string{"t2"}, "", "after its final settle", nil},
		{"twice under one claim", func(l *ledger) { l.claims["k"] = []claim{{1, "t1"}} }, []string{"t1", "t1"}, "", "twice under one claim", nil},
		{"behind a delivered predecessor", func(l *ledger) {
			l.claims["k"] = []claim{{2, "t1"}}
			l.settles["p"] = []settle{{seq: 1, op: "done", final: true}}
		}, []string{"t1"}, "p", "", nil},
		{"behind a predecessor still in flight", func(l *ledger) {
			l.claims["k"] = []claim{{2, "t1"}}
			l.settles["p"] = []settle{{seq: 1, op: "retry", token: "tp"}}
		}, []string{"t1"}, "p", "before its predecessor p was settled", nil},
		{"behind a dead predecessor, on a block route", func(l *ledger) {
			l.claims["k"] = []claim{{2, "t1"}}
			l.settles["p"] = []settle{{seq: 1, op: "dead-letter", final: true}}
		}, []string{"t1"}, "p", "before its predecessor p was settled", nil},
		{"behind a predecessor whose done failed unseen but applied", func(l *ledger) {
			l.claims["k"] = []claim{{2, "t1"}}
			l.unsure["p"] = []settle{{op: "done", token: "tp", final: true}}
		}, []string{"t1"}, "p", "", &outbox.Link{}},
		{"behind a predecessor whose done failed and did not apply", func(l *ledger) {
			l.claims["k"] = []claim{{2, "t1"}}
			l.unsure["p"] = []settle{{op: "done", token: "tp", final: true}}
		}, []string{"t1"}, "p", "before its predecessor p was settled", &outbox.Link{Found: true, Status: outbox.StatusClaimed}},
		{"behind a predecessor whose dead letter applied unseen, on a block route", func(l *ledger) {
			l.claims["k"] = []claim{{2, "t1"}}
			l.unsure["p"] = []settle{{op: "dead-letter", token: "tp", final: true}}
		}, []string{"t1"}, "p", "before its predecessor p was settled", &outbox.Link{Found: true, Status: outbox.StatusFailed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger()
			tc.ledger(l)
			h := handOver{next: nopDeliverer{}, l: l}
			if tc.table != nil {
				h.link = func(context.Context, string) (outbox.Link, error) { return *tc.table, nil }
			}
			for _, tok := range tc.tokens {
				h.Deliver(context.Background(), "q.fifo", []outbox.Row{{Key: "k", Queue: "q.fifo", Token: tok, Prev: tc.prev}})
			}
			if tc.bad == "" {
				require.Empty(t, l.bad)
				return
			}
			require.Len(t, l.bad, 1)
			require.Contains(t, l.bad[0], tc.bad)
		})
	}
}
