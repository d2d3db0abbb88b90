package e2e_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

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
	keys := []string{"g-1", "g-2-bad", "g-3", "g-4"}
	refuse := faults.Refuse{Next: router, Fail: func(r outbox.Row) error {
		if r.Key == keys[1] && r.Closed == "" {
			return outbox.Permanent(errors.New("injected: refused for good"))
		}
		return nil
	}}
	e, err := outbox.New(store, refuse, policy)
	require.NoError(t, err)
	sweep := func() {
		for range 3 {
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
	require.Equal(t, outbox.ClosedDeadLetter, b.Closed)

	joiner := awstest.Subscribe(t, topic, true)
	require.NoError(t, op.Redrive(ctx, keys[1], time.Now()))
	sweep()
	stage(keys[3])
	sweep()

	// run consumes url until g's last row is applied (or a minute is
	// up) and returns what the consumer made of each message, in order.
	run := func(url string, cfg consume.InboxConfig) []string {
		ctable := awstest.UniqueName("reclosed")
		require.NoError(t, consume.CreateTable(ctx, db, ctable))
		cfg.Table = ctable
		in, err := consume.NewInbox(db, cfg)
		require.NoError(t, err)
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var mu sync.Mutex
		var seen []string
		note := func(m consume.Message, err error) error {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				seen = append(seen, m.Key+"/"+m.Closed)
				if m.Key == keys[3] {
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
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	// applied is what the consumer applied or closed, in order: a copy
	// (SNS and SQS deduplicate the second closing message of b within
	// five minutes, but need not) or a gap retried is not.
	applied := func(seen []string) []string {
		var out []string
		for _, s := range seen {
			if !strings.HasSuffix(s, "/gap") && !strings.HasSuffix(s, "/duplicate") && !strings.HasSuffix(s, "/late") {
				out = append(out, s)
			}
		}
		return out
	}

	t.Run("the first queue's consumer applies every row in turn", func(t *testing.T) {
		require.Equal(t, []string{"g-1/", "g-2-bad/dead-letter", "g-3/", "g-4/"},
			applied(run(first, consume.InboxConfig{Consumer: "first"})))
	})
	t.Run("the joiner starts g on trial at the second closing message, and the next row starts it again", func(t *testing.T) {
		require.Equal(t, []string{"g-2-bad/dead-letter", "g-4/"},
			applied(run(joiner, consume.InboxConfig{Consumer: "joiner", Join: consume.JoinWhereSeen})))
	})
}
