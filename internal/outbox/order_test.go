package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// sendLog records every row handed to the deliverer, in order, and fails
// the rows fail picks, without sending them.
type sendLog struct {
	next  outbox.Deliverer
	fail  func(outbox.Row) error
	mu    sync.Mutex
	order []outbox.Row
	calls [][]outbox.Row
}

func (s *sendLog) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	s.mu.Lock()
	s.calls = append(s.calls, slices.Clone(rows))
	s.mu.Unlock()
	errs := make([]error, len(rows))
	var pass []outbox.Row
	var idx []int
	for i, r := range rows {
		if s.fail != nil {
			if err := s.fail(r); err != nil {
				errs[i] = err
				continue
			}
		}
		pass, idx = append(pass, r), append(idx, i)
	}
	if len(pass) > 0 {
		for j, err := range s.next.Deliver(ctx, queue, pass) {
			errs[idx[j]] = err
			if err == nil {
				s.mu.Lock()
				s.order = append(s.order, pass[j])
				s.mu.Unlock()
			}
		}
	}
	return errs
}

// accepted returns, per group, the keys SQS accepted, in order.
func (s *sendLog) accepted() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for _, r := range s.order {
		out[r.Group] = append(out[r.Group], r.Key)
	}
	return out
}

// oneInFlight fails the test if any send carried two rows of one group.
func (s *sendLog) oneInFlight(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, call := range s.calls {
		seen := map[string]bool{}
		for _, r := range call {
			if r.Seq > 0 {
				require.False(t, seen[r.Group], "two rows of group %s in one send: %v", r.Group, call)
				seen[r.Group] = true
			}
		}
	}
}

// stageGroups stages n rows in each ordered group, interleaving the groups,
// and returns each group's keys in staging order.
func (h *harness) stageGroups(t *testing.T, queue string, groups []string, n int) map[string][]string {
	t.Helper()
	keys := map[string][]string{}
	for i := range n {
		for _, g := range groups {
			key := fmt.Sprintf("%s-%s-%02d", queue, g, i)
			row := outbox.Row{Key: key, Queue: queue, Group: g, Payload: []byte(`{"i":` + strconv.Itoa(i) + `}`)}
			require.NoError(t, h.store.StageOrdered(context.Background(), row, h.clock.Now()))
			keys[g] = append(keys[g], key)
		}
	}
	return keys
}

// setRaw sets one attribute of a row's item as a producer in another
// language might write it, past the store's own checks.
func (h *harness) setRaw(t *testing.T, key, attr string, v types.AttributeValue) {
	t.Helper()
	_, err := awstest.DynamoDB(t).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(h.store.Table()), Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String("SET #a = :v"),
		ExpressionAttributeNames:  map[string]string{"#a": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": v},
	})
	require.NoError(t, err)
}

// firstArrivals is keys with each key's later arrivals left out: a row's
// first arrival is its place in its group, and a late copy of it, or the
// message closing its place, comes after.
func firstArrivals(keys []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func orderedPolicy(dh outbox.DeadHead) outbox.Policy {
	p := testPolicy()
	p.Ordered = map[string]outbox.DeadHead{"events.fifo": dh}
	return p
}

var errTransient = errors.New("injected: try again")

func TestOrdered_OneSweepDeliversEveryGroupInStagingOrderOneRowInFlight(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy outbox.Policy
	}{
		{"listed route", orderedPolicy(outbox.DeadHeadBlock)},
		// A producer ordered the rows, but the dispatcher was not told:
		// each row is checked after its claim, and order still holds.
		{"unlisted route", testPolicy()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			want := h.stageGroups(t, "events.fifo", []string{"a", "b", "c"}, 6)
			h.stage(t, rowsFor("orders", 5, "")...)
			log := &sendLog{next: h.sqs}
			e := h.engine(t, tt.policy, log)
			var res outbox.Result
			for range 20 { // the unlisted route may take a sweep per row
				r, err := e.Sweep(context.Background())
				require.NoError(t, err)
				res.Delivered += r.Delivered
				if r.Delivered == 0 {
					break
				}
			}
			require.Equal(t, 23, res.Delivered)
			got := log.accepted()
			for g, keys := range want {
				require.Equal(t, keys, got[g], "group %s in staging order", g)
			}
			log.oneInFlight(t)
		})
	}
}

// readCounter counts the store's head-check reads and due-index queries.
type readCounter struct {
	*dynamo.Store
	links, queries atomic.Int64
}

func (c *readCounter) Link(ctx context.Context, key string) (outbox.Link, error) {
	c.links.Add(1)
	return c.Store.Link(ctx, key)
}

func (c *readCounter) QueryDue(ctx context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	c.queries.Add(1)
	return c.Store.QueryDue(ctx, shard, now, after, limit)
}

// settlesAfterReads is a store beside another invocation that holds head
// and settles it (Done) once the engine has read head's link reads times,
// before its next read: the moment it settles is a count of the engine's
// own reads, the same on a fast machine and a slow one. With reads 0, it
// settles when settle is called.
type settlesAfterReads struct {
	*dynamo.Store
	head  outbox.Row
	reads int64
	now   func() time.Time
	seen  atomic.Int64
	once  sync.Once
	mu    sync.Mutex
	err   error
	// settledAt is how many reads of head's link came before it settled.
	settledAt atomic.Int64
}

func (s *settlesAfterReads) Link(ctx context.Context, key string) (outbox.Link, error) {
	if key == s.head.Key {
		if n := s.seen.Add(1); s.reads > 0 && n > s.reads {
			s.settle(ctx)
		}
	}
	return s.Store.Link(ctx, key)
}

// settle settles head, once.
func (s *settlesAfterReads) settle(ctx context.Context) {
	s.once.Do(func() {
		s.settledAt.Store(s.seen.Load())
		err := s.Store.Done(ctx, s.head, s.now())
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	})
}

// settleErr is the settle's error, for the test's goroutine to assert.
func (s *settlesAfterReads) settleErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func TestOrdered_ListedRouteDrainsAHotGroupInOneSweepWithoutRefusedWrites(t *testing.T) {
	t.Parallel()
	const n = 40
	h := newHarness(t)
	want := h.stageGroups(t, "events.fifo", []string{"hot"}, n)
	store := &readCounter{Store: h.store}
	log := &sendLog{next: h.sqs}
	e, err := outbox.New(store, log, orderedPolicy(outbox.DeadHeadBlock), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	res, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, n, res.Delivered)
	require.Equal(t, n, res.Claimed)
	require.Zero(t, res.Conflicts+res.Errors+res.Released+res.Waiting)
	require.Equal(t, want["hot"], log.accepted()["hot"])
	// The group is spread over every shard, so most rows reach the run
	// before their predecessor: they wait for it in the run, each read
	// once with its predecessor, rather than again in every pass.
	require.LessOrEqual(t, store.links.Load(), int64(2*n))
	require.LessOrEqual(t, store.queries.Load(), int64(3*h.store.Shards()), "at most three passes")
}

func TestOrdered_RetryingHeadHoldsOnlyItsGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	want := h.stageGroups(t, "events.fifo", []string{"slow", "fast"}, 4)
	h.stage(t, rowsFor("orders", 3, "")...)
	var once sync.Once
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) (err error) {
		if r.Key == want["slow"][0] {
			once.Do(func() { err = errTransient })
		}
		return err
	}}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)

	// Phase 1: the slow head fails once; the rest of its group waits, the
	// other group and the unordered rows go.
	res, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 4+3, res.Delivered)
	require.Equal(t, 1, res.Retried)
	require.Positive(t, res.Waiting)
	for _, key := range want["slow"][1:] {
		row := h.row(t, key)
		require.Equal(t, outbox.StatusPending, row.Status)
		require.Zero(t, row.Attempt, "%s was never claimed", key)
	}

	// Phase 2: after the backoff the head goes first, then its group.
	h.clock.Advance(time.Minute)
	res, err = e.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 4, res.Delivered)
	got := log.accepted()
	require.Equal(t, want["slow"], got["slow"])
	require.Equal(t, want["fast"], got["fast"])
}

func TestOrdered_DeadHeadBlocksOrSkipsItsGroupByPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy    outbox.DeadHead
		delivered []int // indexes of group "g" delivered
		// sent are the indexes of group "g" whose key SQS accepted: the
		// delivered rows, and under skip the message closing the dead
		// head's place, in it.
		sent    []int
		blocked int
		// The most claims each sweep may take: one per row on a listed
		// route, and none for rows that wait.
		claims, claimsAfter int
	}{
		{outbox.DeadHeadBlock, nil, nil, 1, 8, 0},
		// One claim more: the closing message's.
		{outbox.DeadHeadSkip, []int{1, 2, 3}, []int{0, 1, 2, 3}, 0, 9, 0},
		// A route the dispatcher was not told is ordered blocks too; each
		// waiting row costs a claim and a release, at most twice a sweep.
		{"", nil, nil, 1, 16, 6},
	}
	for _, tt := range tests {
		t.Run("policy "+string(tt.policy), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			want := h.stageGroups(t, "events.fifo", []string{"g", "other"}, 4)
			log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
				if r.Key == want["g"][0] && r.Closed == "" { // the row, not its place's closing message
					return outbox.Permanent(errors.New("injected: refused for good"))
				}
				return nil
			}}
			p := orderedPolicy(tt.policy)
			if tt.policy == "" {
				p = testPolicy()
			}
			e := h.engine(t, p, log)
			res, err := e.Sweep(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, res.DeadLettered)
			require.Equal(t, 4+len(tt.delivered), res.Delivered)
			require.Equal(t, "drained", res.Stopped)
			require.LessOrEqual(t, res.Claimed, tt.claims)

			// A later sweep finds the group as the first left it.
			h.clock.Advance(time.Minute)
			res, err = e.Sweep(context.Background())
			require.NoError(t, err)
			require.Zero(t, res.Delivered)
			require.Equal(t, "drained", res.Stopped)
			require.LessOrEqual(t, res.Claimed, tt.claimsAfter)
			require.Equal(t, tt.blocked, res.BlockedGroups)
			if tt.blocked > 0 {
				require.GreaterOrEqual(t, res.OldestBlockedAge, time.Minute)
			}
			var wantKeys []string
			for _, i := range tt.sent {
				wantKeys = append(wantKeys, want["g"][i])
			}
			require.Equal(t, wantKeys, log.accepted()["g"])
			if tt.policy == outbox.DeadHeadSkip {
				head := h.row(t, want["g"][0])
				require.Equal(t, outbox.StatusFailed, head.Status, "the head ends a dead letter")
				require.Equal(t, outbox.ClosedDeadLetter, head.Closed, "whose place was closed")
			}
			require.Equal(t, want["other"], log.accepted()["other"])
			if tt.policy != outbox.DeadHeadSkip {
				for _, key := range want["g"][1:] {
					require.Zero(t, h.row(t, key).Attempt, "%s waits behind the dead head", key)
				}
			}
		})
	}
}

func TestOrdered_ClaimedHeadHoldsItsGroupUntilSettledOrItsLeaseLapses(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	want := h.stageGroups(t, "events.fifo", []string{"g"}, 3)
	p := orderedPolicy(outbox.DeadHeadBlock)
	// Another worker claimed the head and crashed: nothing may pass it.
	_, err := h.store.Claim(context.Background(), want["g"][0], h.clock.Now(), p.Lease, p.MaxAttempts)
	require.NoError(t, err)
	log := &sendLog{next: h.sqs}
	e := h.engine(t, p, log)
	res, err := e.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Delivered)
	require.Empty(t, log.accepted())

	h.clock.Advance(p.Lease + time.Second)
	res, err = e.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, res.Delivered)
	require.Equal(t, want["g"], log.accepted()["g"])
}

func TestOrdered_WakeWaitsForAPredecessorInFlightElsewhereUpToHeadWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		wait      time.Duration
		delivered int
	}{
		{"waits, then sends", 10 * time.Second, 1},
		{"never waits", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			k := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
			p := orderedPolicy(outbox.DeadHeadBlock)
			p.HeadWait = tt.wait
			// Another invocation holds the head, and settles it once the
			// wake has read it claimed: a second read finds it done.
			head, err := h.store.Claim(context.Background(), k[0], h.clock.Now(), p.Lease, p.MaxAttempts)
			require.NoError(t, err)
			store := &settlesAfterReads{Store: h.store, head: head, reads: 1, now: h.clock.Now}
			e, err := outbox.New(store, h.sqs, p, outbox.WithClock(h.clock.Now))
			require.NoError(t, err)

			res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{{Key: k[1], Queue: "events.fifo", Prev: k[0], Linked: true}})
			require.NoError(t, err)
			require.NoError(t, store.settleErr())
			require.Equal(t, tt.delivered, res.Delivered)
			require.Equal(t, 1-tt.delivered, res.Waiting)
		})
	}
}

func TestOrdered_WakeSendsOnlyHeadsAndParksRowsBehindOnesItHolds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	want := h.stageGroups(t, "events.fifo", []string{"g"}, 3)
	refs := func(keys ...string) []outbox.DueRef {
		var out []outbox.DueRef
		for _, k := range keys {
			row := h.row(t, k)
			out = append(out, outbox.DueRef{Key: k, Queue: row.Queue, Prev: row.Prev, Linked: true})
		}
		return out
	}
	log := &sendLog{next: h.sqs}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)

	// Phase 1: a stream batch with only the second row: its head is
	// pending elsewhere, so it is left to the sweep, unclaimed.
	res, err := e.DeliverRefs(context.Background(), refs(want["g"][1]))
	require.NoError(t, err)
	require.Zero(t, res.Claimed)
	require.Equal(t, 1, res.Waiting)

	// Phase 2: a batch with all three, newest first: they go in order.
	k := want["g"]
	res, err = e.DeliverRefs(context.Background(), refs(k[2], k[1], k[0]))
	require.NoError(t, err)
	require.Equal(t, 3, res.Delivered)
	require.Equal(t, k, log.accepted()["g"])
	log.oneInFlight(t)
}

func TestOrdered_AWakeRefNamingAnotherPredecessorIsCheckedAgainstTheRow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		prev string // the predecessor the ref claims, not the row's
	}{
		// A stream image of an earlier row of the same key (delivered,
		// deleted, staged again in another place) names another
		// predecessor, or none.
		{"no predecessor", ""},
		{"a delivered predecessor", "gone-long-ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			k := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
			log := &sendLog{next: h.sqs}
			e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)

			// Phase 1: the head is pending and never tried; the second row
			// must not go, whatever the ref says.
			res, err := e.DeliverRefs(context.Background(), []outbox.DueRef{{Key: k[1], Queue: "events.fifo", Prev: tt.prev, Linked: true}})
			require.NoError(t, err)
			require.Zero(t, res.Delivered)
			require.Equal(t, 1, res.Waiting)
			require.Empty(t, log.accepted())
			require.Equal(t, outbox.StatusPending, h.row(t, k[1]).Status)

			// Phase 2: a sweep sends both, head first.
			res, err = e.Sweep(context.Background())
			require.NoError(t, err)
			require.Equal(t, 2, res.Delivered)
			require.Equal(t, k, log.accepted()["g"])
		})
	}
}

func TestOrdered_ARowWhosePrevIsMalformedBlocksItsGroupUnderEitherPolicy(t *testing.T) {
	t.Parallel()
	for _, dh := range []outbox.DeadHead{outbox.DeadHeadSkip, outbox.DeadHeadBlock} {
		t.Run(string(dh), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			k := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
			// A producer in another language wrote the second row's prev
			// as a number: its place in the group is unknown.
			h.setRaw(t, k[1], dynamo.AttrPrev, &types.AttributeValueMemberN{Value: "1"})
			var once sync.Once
			log := &sendLog{next: h.sqs, fail: func(r outbox.Row) (err error) {
				if r.Key == k[0] {
					once.Do(func() { err = errTransient })
				}
				return err
			}}
			e := h.engine(t, orderedPolicy(dh), log)

			// Phase 1: the head retries; the malformed row is a dead
			// letter with its reason; the third row waits.
			res, err := e.Sweep(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, res.Retried)
			require.Equal(t, 1, res.DeadLettered)
			require.Zero(t, res.Delivered)
			raw, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{
				TableName: aws.String(h.store.Table()), Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: k[1]}},
			})
			require.NoError(t, err)
			require.Equal(t, &types.AttributeValueMemberS{Value: "failed"}, raw.Item[dynamo.AttrStatus])
			require.Contains(t, raw.Item[dynamo.AttrLastError].(*types.AttributeValueMemberS).Value, "prev must be a string")
			require.Zero(t, h.row(t, k[2]).Attempt)

			// Phase 2: the head goes; the third row still waits behind
			// the dead letter whose place is unknown, whatever the policy.
			h.clock.Advance(time.Minute)
			res, err = e.Sweep(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, res.Delivered)
			require.Equal(t, 1, res.BlockedGroups)
			require.Zero(t, h.row(t, k[2]).Attempt)

			// Phase 3: an operator purges it, and the group moves on.
			op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
			require.NoError(t, err)
			require.NoError(t, op.Purge(context.Background(), k[1], h.clock.Now(), time.Time{}, dynamo.UnsureBound{}))
			res, err = e.Sweep(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, res.Delivered)
			require.Equal(t, []string{k[0], k[2]}, log.accepted()["g"])
		})
	}
}
