package e2e_test

import (
	"context"
	"errors"
	"strings"
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

// Adversarial review of the outflow.redriven mark on closing messages
// (1d9e3dd). A skip route's dead letter b (place 2) whose closing message
// is refused for good (closed=unsent) holds g; a queue is subscribed
// then. The operator redrives b: the row is refused again, and so is its
// second closing message (unsent again). The operator then purges b: the
// purge's closing message, of a redriven row, goes marked; g's next rows
// follow. Every consumer must apply or close places 2.. exactly once, in
// order: the first queue's consumer (firm from place 1: the mark in its
// turn must change nothing, no trial) and the joiner (JoinWhereSeen: on
// trial at the purge's closing message, for good at place 3, sent in its
// turn; it must not pass place 3 or 4, which do come).
func TestAdvJoin_RedrivenRowClosedUnsentThenPurgedStartsTheJoinerOnTrialAndLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := awstest.DynamoDB(t)
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(db, outflow.Config{Table: table, Shards: 1, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(db, dynamo.Config{Table: table, Shards: 1, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	op, err := dynamo.NewOperator(db, dynamo.Config{Table: table, Shards: 1})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.MaxAttempts = 1
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadSkip}
	topic := awstest.NewTopic(t, true)
	first := awstest.Subscribe(t, topic, true)
	router, err := delivery.New(delivery.Clients{SNS: awstest.SNS(t)}, delivery.Routes{"events.fifo": topic}, 0)
	require.NoError(t, err)
	keys := []string{"g-1", "g-2-bad", "g-3", "g-4", "g-5"}
	var refuseClosing atomic.Bool
	refuseClosing.Store(true)
	refuse := faults.Refuse{Next: router, Fail: func(r outbox.Row) error {
		if r.Key == keys[1] && (r.Closed == "" || refuseClosing.Load()) {
			return outbox.Permanent(errors.New("injected: refused for good"))
		}
		return nil
	}}
	e, err := outbox.New(store, refuse, policy)
	require.NoError(t, err)
	sweep := func() {
		for range 4 {
			_, err := e.Sweep(ctx)
			require.NoError(t, err)
		}
	}
	stage := func(k string) {
		_, err := p.Put(ctx, outflow.Row{Key: k, Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)})
		require.NoError(t, err)
	}
	for _, k := range keys[:3] {
		stage(k)
	}
	sweep()
	b, err := store.Get(ctx, keys[1])
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, b.Status)
	require.Equal(t, outbox.ClosedUnsent, b.Closed, "b's closing message was refused for good: its place is open and holds g")

	joiner := awstest.Subscribe(t, topic, true)
	require.NoError(t, op.Redrive(ctx, keys[1], time.Now()))
	sweep()
	b, err = store.Get(ctx, keys[1])
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, b.Status)
	require.True(t, outbox.PlaceOpen(b.Closed), "redriven, b and its closing message were refused again: closed %q", b.Closed)
	require.False(t, b.RedrivenAt.IsZero())

	refuseClosing.Store(false)
	require.NoError(t, op.Purge(ctx, keys[1], time.Now(), time.Time{}, dynamo.UnsureBound{}))
	sweep()
	stage(keys[3])
	sweep()
	stage(keys[4])
	sweep()

	run := func(url string, cfg consume.InboxConfig) ([]string, map[string]types.AttributeValue) {
		ctable := awstest.UniqueName("advjoin")
		require.NoError(t, consume.CreateTable(ctx, db, ctable))
		cfg.Table = ctable
		in, err := consume.NewInbox(db, cfg)
		require.NoError(t, err)
		pctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		var mu sync.Mutex
		var seen []string
		note := func(m consume.Message, err error) error {
			mu.Lock()
			defer mu.Unlock()
			mark := ""
			if m.Redriven {
				mark = "*"
			}
			switch {
			case err == nil:
				seen = append(seen, m.Key+"/"+m.Closed+mark)
				if m.Key == keys[4] {
					cancel()
				}
			case errors.Is(err, consume.ErrDuplicate):
				seen = append(seen, m.Key+"/duplicate")
			case errors.Is(err, consume.ErrLate):
				seen = append(seen, m.Key+"/late")
			case errors.Is(err, consume.ErrGap):
				seen = append(seen, m.Key+"/gap")
			}
			return err
		}
		poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
			Apply:  func(ctx context.Context, m consume.Message) error { return note(m, in.Apply(ctx, m)) },
			Closed: func(ctx context.Context, m consume.Message) error { return note(m, in.Close(ctx, m)) }}
		require.NoError(t, poller.Run(pctx))
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(ctable), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "cursor " + cfg.Consumer + " g"}}})
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		var applied []string
		for _, s := range seen {
			if !strings.HasSuffix(s, "/gap") && !strings.HasSuffix(s, "/duplicate") {
				applied = append(applied, s)
			}
		}
		return applied, out.Item
	}

	t.Run("the first queue's consumer, firm from place 1, closes b in its turn and stays firm", func(t *testing.T) {
		got, cursor := run(first, consume.InboxConfig{Consumer: "first", Join: consume.JoinWhereSeen})
		require.Equal(t, []string{"g-1/", "g-2-bad/purged*", "g-3/", "g-4/", "g-5/"}, got)
		require.NotContains(t, cursor, "joining")
		require.NotContains(t, cursor, "joined")
	})
	t.Run("the joiner starts g on trial at b's purge and applies every later place", func(t *testing.T) {
		got, cursor := run(joiner, consume.InboxConfig{Consumer: "joiner", Join: consume.JoinWhereSeen})
		require.Equal(t, []string{"g-2-bad/purged*", "g-3/", "g-4/", "g-5/"}, got)
		require.NotContains(t, cursor, "joining")
		require.Equal(t, &types.AttributeValueMemberN{Value: "2"}, cursor["joined"])
	})
}
