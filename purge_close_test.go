package outflow_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// refusing is a deliverer that refuses the rows of the keys it names for
// good, and sends the rest.
type refusing struct {
	next outbox.Deliverer
	keys map[string]bool
}

func (r refusing) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	var pass []outbox.Row
	var idx []int
	for i, row := range rows {
		if r.keys[row.Key] && row.Closed == "" { // the row, not its place's closing message
			errs[i] = outbox.Permanent(errors.New("refused by the test"))
			continue
		}
		pass, idx = append(pass, row), append(idx, i)
	}
	for j, err := range r.next.Deliver(ctx, queue, pass) {
		errs[idx[j]] = err
	}
	return errs
}

// A dead head purged on a block route used to leave its place unsent, and
// a GapWait consumer waited for it for ever (an outside review, B2). The
// purge now sends a message closing the place, in the place, and the
// consumer's cursor moves past it to the group's next row.
func TestPurge_ClosesTheDeadHeadsPlaceSoAGapWaitConsumerGoesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.MaxAttempts = 1
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
	url := awstest.NewQueue(t, true)
	router, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": url}, 0)
	require.NoError(t, err)

	// Phase 1: the second row is refused and dead-lettered; its group
	// blocks behind it.
	keys := []string{"order-8-created", "order-8-bad", "order-8-paid"}
	for _, k := range keys {
		_, err := p.Put(ctx, outflow.Row{Key: k, Queue: "events.fifo", Group: "order-8", Payload: []byte(`{"k":"` + k + `"}`)})
		require.NoError(t, err)
	}
	e, err := outbox.New(store, refusing{next: router, keys: map[string]bool{keys[1]: true}}, policy)
	require.NoError(t, err)
	for range 2 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	dead, err := store.Get(ctx, keys[1])
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, dead.Status)

	// Phase 2: the operator purges it, and the sweep sends the place's
	// closing message, then the group's next row.
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	res, err := operate.Purge(ctx, op, []string{keys[1]}, operate.Selection{}, time.Now(), operate.Hold{Now: time.Now(), Wait: policy.UnsureWait()}, func() {})
	require.NoError(t, err)
	require.Equal(t, 1, res.Done)
	e, err = outbox.New(store, router, policy)
	require.NoError(t, err)
	for range 2 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "Outflow has nothing left to send")

	// Phase 3: a GapWait consumer applies the group to its end.
	ctable := awstest.UniqueName("purge-consumer")
	require.NoError(t, consume.CreateTable(ctx, awstest.DynamoDB(t), ctable))
	inbox, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: ctable, Consumer: "ledger", Gaps: consume.GapWait})
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []string
	record := func(m consume.Message) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.Key+"/"+m.Closed)
	}
	pctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
		Apply: func(ctx context.Context, m consume.Message) error {
			err := inbox.Apply(ctx, m, logEffect(t, ctable, m.Group, m.Key))
			if err == nil {
				record(m)
			}
			return err
		},
		Closed: func(ctx context.Context, m consume.Message) error {
			require.Equal(t, int64(2), m.Seq, "the closing message holds the purged row's place")
			require.Equal(t, []byte(`{"outflow":"closed"}`), m.Payload, "and none of its payload")
			err := inbox.Close(ctx, m)
			if err == nil {
				record(m)
			}
			return err
		}}
	require.NoError(t, poller.Run(pctx))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{keys[0] + "/", keys[1] + "/purged", keys[2] + "/"}, seen)
}

// Under skip a dead letter's place used to be left unsent, and only
// GapPass got past it. Now the dispatcher closes the place before the
// group goes on: a GapWait consumer applies the group to its end, and the
// dead letter, redriven, comes late and is recorded, never retried.
func TestSkip_ClosesTheDeadLettersPlaceBeforeTheGroupGoesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.MaxAttempts = 1
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadSkip}
	url := awstest.NewQueue(t, true)
	router, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": url}, 0)
	require.NoError(t, err)

	// Phase 1: the second row is refused; its place is closed, then the
	// third row goes.
	keys := []string{"order-9-created", "order-9-bad", "order-9-paid"}
	for _, k := range keys {
		_, err := p.Put(ctx, outflow.Row{Key: k, Queue: "events.fifo", Group: "order-9", Payload: []byte(`{"k":"` + k + `"}`)})
		require.NoError(t, err)
	}
	e, err := outbox.New(store, refusing{next: router, keys: map[string]bool{keys[1]: true}}, policy)
	require.NoError(t, err)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLettered)
	require.Equal(t, 2, res.Delivered)
	dead, err := store.Get(ctx, keys[1])
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, dead.Status, "the refused row ends a dead letter")
	require.Equal(t, outbox.ClosedDeadLetter, dead.Closed, "whose place was closed")

	// Phase 2: a GapWait consumer applies the group to its end.
	ctable := awstest.UniqueName("skip-consumer")
	require.NoError(t, consume.CreateTable(ctx, awstest.DynamoDB(t), ctable))
	inbox, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: ctable, Consumer: "ledger", Gaps: consume.GapWait})
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []string
	note := func(m consume.Message, err error) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			seen = append(seen, m.Key+"/"+m.Closed)
		case errors.Is(err, consume.ErrLate):
			seen = append(seen, m.Key+"/late")
		}
		return err
	}
	poll := func() {
		pctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
			Apply: func(ctx context.Context, m consume.Message) error {
				return note(m, inbox.Apply(ctx, m, logEffect(t, ctable, m.Group, m.Key)))
			},
			Closed: func(ctx context.Context, m consume.Message) error { return note(m, inbox.Close(ctx, m)) }}
		require.NoError(t, poller.Run(pctx))
	}
	poll()
	require.Equal(t, []string{keys[0] + "/", keys[1] + "/dead-letter", keys[2] + "/"}, seen)

	// Phase 3: the operator redrives the dead letter; it comes late, is
	// recorded and acknowledged, and applies nothing (LateRecord).
	require.NoError(t, store.Redrive(ctx, keys[1], time.Now()))
	e, err = outbox.New(store, router, policy)
	require.NoError(t, err)
	res, err = e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	poll()
	require.Equal(t, []string{keys[0] + "/", keys[1] + "/dead-letter", keys[2] + "/", keys[1] + "/late"}, seen)
}
