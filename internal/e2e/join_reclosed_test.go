package e2e_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// joinRig is one ordered group g of a skip route on a FIFO topic, with a
// queue subscribed from the start (first), an engine with one attempt per
// row, and the operator.
type joinRig struct {
	ctx    context.Context
	db     *dynamodb.Client
	store  *dynamo.Store
	op     *dynamo.Operator
	topic  string
	first  string
	engine *outbox.Engine
	p      *outflow.Producer
}

// newJoinRig builds the rig; refused says which rows the topic refuses
// for good (an injected fault).
func newJoinRig(t *testing.T, refused func(outbox.Row) bool) *joinRig {
	t.Helper()
	r := &joinRig{ctx: context.Background(), db: awstest.DynamoDB(t)}
	table := awstest.NewTable(t)
	var err error
	r.p, err = outflow.NewProducer(r.db, outflow.Config{Table: table, Shards: 1, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	r.store, err = dynamo.New(r.db, dynamo.Config{Table: table, Shards: 1, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	r.op, err = dynamo.NewOperator(r.db, dynamo.Config{Table: table, Shards: 1})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.MaxAttempts = 1
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadSkip}
	r.topic = awstest.NewTopic(t, true)
	r.first = awstest.Subscribe(t, r.topic, true)
	router, err := delivery.New(delivery.Clients{SNS: awstest.SNS(t)}, delivery.Routes{"events.fifo": r.topic}, 0)
	require.NoError(t, err)
	refuse := faults.Refuse{Next: router, Fail: func(row outbox.Row) error {
		if refused(row) {
			return outbox.Permanent(errors.New("injected: refused for good"))
		}
		return nil
	}}
	r.engine, err = outbox.New(r.store, refuse, policy)
	require.NoError(t, err)
	return r
}

// stage stages each key as g's next row.
func (r *joinRig) stage(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		_, err := r.p.Put(r.ctx, outflow.Row{Key: k, Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)})
		require.NoError(t, err)
	}
}

// sweep sweeps until every due row went, closing messages included.
func (r *joinRig) sweep(t *testing.T) {
	t.Helper()
	for range 4 {
		_, err := r.engine.Sweep(r.ctx)
		require.NoError(t, err)
	}
}

// consume reads url with a Poller and an Inbox of its own until the row
// last is applied (or a minute is up), and returns what the consumer
// applied or closed, in order (a copy or a gap retried is not; a
// redriven copy is marked *), and g's cursor.
func (r *joinRig) consume(t *testing.T, url string, cfg consume.InboxConfig, last string) ([]string, map[string]types.AttributeValue) {
	t.Helper()
	cfg.Table = awstest.UniqueName("join")
	require.NoError(t, consume.CreateTable(r.ctx, r.db, cfg.Table))
	in, err := consume.NewInbox(r.db, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	var mu sync.Mutex
	var applied []string
	note := func(m consume.Message, err error) error {
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, m.Key+"/"+m.Closed+map[bool]string{true: "*"}[m.Redriven])
		if m.Key == last {
			cancel()
		}
		return nil
	}
	poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
		Apply:  func(ctx context.Context, m consume.Message) error { return note(m, in.Apply(ctx, m)) },
		Closed: func(ctx context.Context, m consume.Message) error { return note(m, in.Close(ctx, m)) }}
	require.NoError(t, poller.Run(ctx))
	out, err := r.db.GetItem(r.ctx, &dynamodb.GetItemInput{TableName: aws.String(cfg.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "cursor " + cfg.Consumer + " g"}}})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	return applied, out.Item
}

// A queue subscribed to a skip route's FIFO topic after group g went
// past its dead letter b (place 2, closed by its message); the operator
// then redrives b, which is refused again, so the engine closes b's
// place a second time: that closing message is the new queue's first
// message of g. It carries outflow.redriven, as every copy of a redriven
// row does, so a JoinWhereSeen (GapWait) consumer of the new queue starts
// g there only on trial, and g's next row, place 4 (place 3 went before
// the queue existed), starts it again past the gap. Unmarked, as before
// 1.0.0, the joiner took place 2 for good and place 4 waited for ever.
func TestJoin_ARedrivenRowsSecondClosingMessageStartsAJoinersGroupOnlyOnTrial(t *testing.T) {
	t.Parallel()
	r := newJoinRig(t, func(row outbox.Row) bool { return row.Key == "g-2-bad" && row.Closed == "" })
	r.stage(t, "g-1", "g-2-bad", "g-3")
	r.sweep(t)
	b, err := r.store.Get(r.ctx, "g-2-bad")
	require.NoError(t, err)
	require.Equal(t, outbox.ClosedDeadLetter, b.Closed)

	joiner := awstest.Subscribe(t, r.topic, true)
	require.NoError(t, r.op.Redrive(r.ctx, "g-2-bad", time.Now()))
	r.sweep(t)
	r.stage(t, "g-4")
	r.sweep(t)

	t.Run("the first queue's consumer applies every row in turn", func(t *testing.T) {
		// SNS and SQS deduplicate b's second closing message within five
		// minutes; a copy would be refused as a duplicate all the same.
		got, _ := r.consume(t, r.first, consume.InboxConfig{Consumer: "first"}, "g-4")
		require.Equal(t, []string{"g-1/", "g-2-bad/dead-letter", "g-3/", "g-4/"}, got)
	})
	t.Run("the joiner starts g on trial at the second closing message, and the next row starts it again", func(t *testing.T) {
		got, cursor := r.consume(t, joiner, consume.InboxConfig{Consumer: "joiner", Join: consume.JoinWhereSeen}, "g-4")
		require.Equal(t, []string{"g-2-bad/dead-letter*", "g-4/"}, got)
		require.NotContains(t, cursor, "joining")
		require.Equal(t, &types.AttributeValueMemberN{Value: "4"}, cursor["joined"])
	})
}

// From the review of the mark on closing messages: b's (place 2) closing
// message is refused for good too (closed=unsent), so its place stays
// open and holds g; a queue is subscribed then. Redriven, b and its
// second closing message are refused again; the operator then purges b,
// and the purge's closing message, of a redriven row, goes marked. Every
// consumer applies or closes places 2.. once, in order: the first queue's
// (firm from place 1: the mark in its turn changes nothing) and the
// joiner (on trial at the purge's closing message, for good at place 3,
// sent in its turn: places 3 and 4, which do come, are not passed).
func TestJoin_APurgedRedrivenRowStartsAJoinerOnTrialAndNoLaterPlaceIsPassed(t *testing.T) {
	t.Parallel()
	var refuseClosing atomic.Bool
	refuseClosing.Store(true)
	r := newJoinRig(t, func(row outbox.Row) bool {
		return row.Key == "g-2-bad" && (row.Closed == "" || refuseClosing.Load())
	})
	r.stage(t, "g-1", "g-2-bad", "g-3")
	r.sweep(t)
	b, err := r.store.Get(r.ctx, "g-2-bad")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, b.Status)
	require.Equal(t, outbox.ClosedUnsent, b.Closed, "b's closing message was refused for good: its place is open and holds g")

	joiner := awstest.Subscribe(t, r.topic, true)
	require.NoError(t, r.op.Redrive(r.ctx, "g-2-bad", time.Now()))
	r.sweep(t)
	b, err = r.store.Get(r.ctx, "g-2-bad")
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, b.Status)
	require.True(t, outbox.PlaceOpen(b.Closed), "redriven, b and its closing message were refused again: closed %q", b.Closed)
	require.False(t, b.RedrivenAt.IsZero())

	refuseClosing.Store(false)
	require.NoError(t, r.op.Purge(r.ctx, "g-2-bad", time.Now(), time.Time{}, dynamo.UnsureBound{}))
	r.sweep(t)
	r.stage(t, "g-4")
	r.sweep(t)
	r.stage(t, "g-5")
	r.sweep(t)

	t.Run("the first queue's consumer, firm from place 1, closes b in its turn and stays firm", func(t *testing.T) {
		got, cursor := r.consume(t, r.first, consume.InboxConfig{Consumer: "first", Join: consume.JoinWhereSeen}, "g-5")
		require.Equal(t, []string{"g-1/", "g-2-bad/purged*", "g-3/", "g-4/", "g-5/"}, got)
		require.NotContains(t, cursor, "joining")
		require.NotContains(t, cursor, "joined")
	})
	t.Run("the joiner starts g on trial at b's purge and applies every later place", func(t *testing.T) {
		got, cursor := r.consume(t, joiner, consume.InboxConfig{Consumer: "joiner", Join: consume.JoinWhereSeen}, "g-5")
		require.Equal(t, []string{"g-2-bad/purged*", "g-3/", "g-4/", "g-5/"}, got)
		require.NotContains(t, cursor, "joining")
		require.Equal(t, &types.AttributeValueMemberN{Value: "2"}, cursor["joined"])
	})
}
