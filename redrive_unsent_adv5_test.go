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
	"github.com/outflowhq/outflow/internal/outbox"
)

// Adversarial review 5 (issue 50, item 3): under skip, row b is refused
// for good and its place's closing message fails for good. Before the
// fix the dead letter read closed = unsent whether or not that message
// had reached SQS, and a redrive of it, which the docs said "goes in its
// place", was recorded late at a GapWait consumer that had closed the
// place, and applied nowhere, while the dispatcher settled it done.
//
// The promise now, each case end to end through SQS and consume.Inbox:
//   - a closing message refused for certain leaves closed = unsent, and a
//     redrive sends b in its place: the consumer applies it, then c;
//   - a closing message whose send ended unsure leaves closed = unsure, and
//     a redrive is refused (MayHaveClosedError: purge it, or redrive it as
//     late), so the dispatcher never settles done a row it promised would
//     go in its place; redriven as late, b arrives late, as the operator
//     was told, and c follows.
func TestAdv5_ARedriveOfAnUnsentPlaceGoesInItsPlaceOnlyIfItsClosingMessageCertainlyDidNotLand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// unsure says the closing message reached SQS but its send's
		// answer was lost (a timeout); else SQS refused it for good.
		unsure bool
		closed string
		// seenB is how the consumer saw b after the redrive.
		seenB string
	}{
		{name: "closing message refused for certain: b goes in its place", closed: outbox.ClosedUnsent, seenB: "/"},
		{name: "closing message may have landed: the redrive is refused, and a late one is late", unsure: true, closed: outbox.ClosedUnsure, seenB: "/late"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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

			keys := []string{"order-7-created", "order-7-bad", "order-7-paid"}
			for _, k := range keys {
				_, err := p.Put(ctx, outflow.Row{Key: k, Queue: "events.fifo", Group: "order-7", Payload: []byte(`{"k":"` + k + `"}`)})
				require.NoError(t, err)
			}
			// Phase 1: b refused for good; its closing message fails
			// for good too, perhaps having landed.
			refuse := refusing{next: router, keys: map[string]bool{keys[1]: true}}
			e, err := outbox.New(store, closingFails{refusing: refuse, next: router, key: keys[1], unsure: tt.unsure}, policy)
			require.NoError(t, err)
			for range 3 {
				_, err := e.Sweep(ctx)
				require.NoError(t, err)
			}
			dead, err := store.Get(ctx, keys[1])
			require.NoError(t, err)
			require.Equal(t, outbox.StatusFailed, dead.Status)
			require.Equal(t, tt.closed, dead.Closed, "its place counts as open, and says whether its closing message may have landed")
			c, err := store.Get(ctx, keys[2])
			require.NoError(t, err)
			require.Equal(t, outbox.StatusPending, c.Status, "c waits behind b's open place")

			// Phase 2: the operator redrives b.
			err = store.Redrive(ctx, keys[1], time.Now())
			if tt.unsure {
				var refused *dynamo.MayHaveClosedError
				require.ErrorAs(t, err, &refused, "a redrive of a place whose closing message may have landed is refused, not promised in its place")
				require.Contains(t, err.Error(), "purge it")
				dead, gerr := store.Get(ctx, keys[1])
				require.NoError(t, gerr)
				require.Equal(t, outbox.StatusFailed, dead.Status, "the refused redrive changed nothing")
				// The operator, told it may arrive late, redrives it so.
				err = store.RedriveLate(ctx, keys[1], time.Now())
			}
			require.NoError(t, err)
			e, err = outbox.New(store, router, policy)
			require.NoError(t, err)
			for range 3 {
				_, err := e.Sweep(ctx)
				require.NoError(t, err)
			}
			require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "Outflow has nothing left to send")

			// Phase 3: a GapWait consumer (the defaults) applies the queue.
			ctable := awstest.UniqueName("adv5-consumer")
			require.NoError(t, consume.CreateTable(ctx, awstest.DynamoDB(t), ctable))
			inbox, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: ctable, Consumer: "ledger"})
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
			pctx, cancel := context.WithTimeout(ctx, 4*time.Second)
			defer cancel()
			poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
				Apply: func(ctx context.Context, m consume.Message) error {
					return note(m, inbox.Apply(ctx, m, logEffect(t, ctable, m.Group, m.Key)))
				},
				Closed: func(ctx context.Context, m consume.Message) error { return note(m, inbox.Close(ctx, m)) }}
			require.NoError(t, poller.Run(pctx))
			mu.Lock()
			defer mu.Unlock()
			require.Contains(t, seen, keys[1]+tt.seenB, "the consumer saw %v", seen)
			require.Contains(t, seen, keys[2]+"/", "c is applied after b's place: the consumer saw %v", seen)
			if !tt.unsure {
				require.Equal(t, []string{keys[0] + "/", keys[1] + "/", keys[2] + "/"}, seen, "b went in its place, as the docs say")
			}
		})
	}
}

// closingFails refuses b's row for good without sending it, and fails
// b's closing message: sent, then answered as a timeout does (unsure), or
// refused for good without being sent.
type closingFails struct {
	refusing refusing
	next     outbox.Deliverer
	key      string
	unsure   bool
}

func (d closingFails) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	if !d.unsure {
		errs := make([]error, len(rows))
		var pass []outbox.Row
		var idx []int
		for i, row := range rows {
			if row.Key == d.key && row.Closed != "" {
				errs[i] = outbox.Permanent(errors.New("injected: the closing message refused for good"))
				continue
			}
			pass, idx = append(pass, row), append(idx, i)
		}
		for j, err := range d.refusing.Deliver(ctx, queue, pass) {
			errs[idx[j]] = err
		}
		return errs
	}
	errs := d.refusing.Deliver(ctx, queue, rows)
	for i, row := range rows {
		if row.Key == d.key && row.Closed != "" && errs[i] == nil {
			errs[i] = errors.New("injected: the call timed out after SQS stored the message")
		}
	}
	return errs
}
