package outflow_test

// From the review of issue 38: a producer's retry after a lost answer,
// with the done retention under SQS FIFO's 5-minute deduplication window
// (OUTFLOW_DONE_RETENTION=0, which the docs offer). The key is staged
// again at the group's next place. Sent with the key as its deduplication
// id, SQS dropped it and answered as if it stored it: the place never
// reached the consumer, and a GapWait consumer refused every later place
// of the group for ever. A placed row's deduplication id is now its key
// and its place, so the place arrives and the consumer closes it as
// restaged.

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

func TestRestage_AKeyStagedAgainInsideSQSDeduplicationWindowReachesTheConsumerAtItsPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	api := &lostResponseAPI{API: awstest.DynamoDB(t)}
	p, err := outflow.NewProducer(api, outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	// OUTFLOW_DONE_RETENTION=0: documented, accepted by the configuration.
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

	created := outflow.Row{Key: "order-38-created", Queue: "events.fifo", Group: "order-38", Payload: []byte(`{"e":"created"}`)}
	_, err = p.Put(ctx, created)
	require.Error(t, err, "the answer was lost; the transaction committed")
	_, err = e.Sweep(ctx) // place 1 delivered, and deleted (no retention)
	require.NoError(t, err)
	_, err = p.Put(ctx, created) // the producer's retry, seconds later: place 2
	require.NoError(t, err)
	paid := outflow.Row{Key: "order-38-paid", Queue: "events.fifo", Group: "order-38", Payload: []byte(`{"e":"paid"}`)}
	_, err = p.Put(ctx, paid) // place 3
	require.NoError(t, err)
	for range 3 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "Outflow settled every row as delivered: no dead letter, no alarm")

	ctable := awstest.UniqueName("restage-dedup")
	require.NoError(t, consume.CreateTable(ctx, awstest.DynamoDB(t), ctable))
	inbox, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: ctable, Consumer: "ledger"})
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []int64
	outcomes := map[string][]string{}
	pctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
		Closed: inbox.Close,
		Apply: func(ctx context.Context, m consume.Message) error {
			err := inbox.Apply(ctx, m, logEffect(t, ctable, m.Group, m.Key))
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, m.Seq)
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
	t.Logf("places received: %v; outcomes: %v", seen, outcomes)
	require.Contains(t, seen, int64(2), "place 2 (the key staged again) never reached the consumer: SQS dropped it by its deduplication id, the key")
	require.Contains(t, outcomes[paid.Key], "applied", "place 3 is refused as a gap for ever")
}
