package outflow_test

// From a review of eabec13, whose deduplication id named a row's place by
// its key and seq, not by its group. SQS deduplicates per queue, so the same key
// staged in another group of the same queue at the same seq inside the
// 5-minute window (a producer that reused the key, or a retry that moved
// to another group, after the done row was deleted) is dropped by SQS: the
// consumer's Inbox handles a key at another group's place (it closes it as
// restaged), but never sees it, and a GapWait consumer stalls group B.

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

func TestRestage_AKeyStagedInAnotherGroupAtTheSamePlaceReachesTheConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4, DoneRetention: 0})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
	url := awstest.NewQueue(t, true)
	sender, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": url}, 0)
	require.NoError(t, err)
	e, err := outbox.New(store, sender, policy)
	require.NoError(t, err)

	// Group A's first row, delivered and deleted (no retention).
	_, err = p.Put(ctx, outflow.Row{Key: "notify-7", Queue: "events.fifo", Group: "customer-A", Payload: []byte(`{"to":"A"}`)})
	require.NoError(t, err)
	_, err = e.Sweep(ctx)
	require.NoError(t, err)
	// The key again, seconds later, as group B's first row: place 1 of B.
	_, err = p.Put(ctx, outflow.Row{Key: "notify-7", Queue: "events.fifo", Group: "customer-B", Payload: []byte(`{"to":"B"}`)})
	require.NoError(t, err)
	next := outflow.Row{Key: "b-2", Queue: "events.fifo", Group: "customer-B", Payload: []byte(`{"n":2}`)}
	_, err = p.Put(ctx, next) // place 2 of B
	require.NoError(t, err)
	for range 3 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "Outflow settled every row as delivered")

	ctable := awstest.UniqueName("restage-group")
	require.NoError(t, consume.CreateTable(ctx, awstest.DynamoDB(t), ctable))
	inbox, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: ctable, Consumer: "ledger"})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string][]int64{}
	outcomes := map[string][]string{}
	pctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
		Closed: inbox.Close,
		Apply: func(ctx context.Context, m consume.Message) error {
			err := inbox.Apply(ctx, m, logEffect(t, ctable, m.Group, m.Key))
			mu.Lock()
			defer mu.Unlock()
			seen[m.Group] = append(seen[m.Group], m.Seq)
			switch {
			case err == nil:
				outcomes[m.Key] = append(outcomes[m.Key], "applied")
			case errors.Is(err, consume.ErrDuplicate):
				outcomes[m.Key] = append(outcomes[m.Key], "duplicate")
			case errors.Is(err, consume.ErrGap):
				outcomes[m.Key] = append(outcomes[m.Key], "gap")
			default:
				outcomes[m.Key] = append(outcomes[m.Key], err.Error())
			}
			return err
		}}
	require.NoError(t, poller.Run(pctx))

	mu.Lock()
	defer mu.Unlock()
	t.Logf("places received by group: %v; outcomes: %v", seen, outcomes)
	require.Contains(t, seen["customer-B"], int64(1), "place 1 of group B never reached the consumer: SQS dropped it as a copy of group A's place 1 (same id notify-7#1)")
	require.Contains(t, outcomes[next.Key], "applied", "place 2 of group B is refused as a gap for ever")
}
