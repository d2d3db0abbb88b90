package outflow_test

import (
	"context"
	"errors"
	"fmt"
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

// TestRestage_AKeyStagedAgainInsideSQSDeduplicationWindowReachesTheConsumer:
// with the done retention under SQS FIFO's 5-minute deduplication window
// (OUTFLOW_DONE_RETENTION=0, which the docs offer), a key delivered and
// deleted is staged again seconds later at a new place: of its group (a
// producer's retry after a lost answer) or of another group of the same
// queue (SQS deduplicates across a queue's groups). Sent with the key, or
// the key and place, as its deduplication id, SQS dropped it and answered
// as if it stored it: the place never reached the consumer, and a GapWait
// consumer refused every later place of the group for ever (two
// adversarial reviews of issue 38). The id now hashes the group and the
// key with the place, so the place arrives and the consumer closes it as
// restaged.
func TestRestage_AKeyStagedAgainInsideSQSDeduplicationWindowReachesTheConsumer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// again is the group the key is staged again in, at its next place.
		again string
		// lostAnswer: the first Put's answer is lost, so the producer retries.
		lostAnswer bool
	}{
		{"a producer's retry, at the next place of its group", "order-38", true},
		{"the key again, at the same place of another group", "order-39", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			table := awstest.NewTable(t)
			var api outflow.DynamoDB = awstest.DynamoDB(t)
			if tc.lostAnswer {
				api = &lostResponseAPI{API: awstest.DynamoDB(t)}
			}
			p, err := outflow.NewProducer(api, outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
			require.NoError(t, err)
			store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4, DoneRetention: 0})
			require.NoError(t, err)
			policy := outbox.DefaultPolicy()
			policy.WakeGrace, policy.BatchLinger = 0, 5*time.Millisecond
			policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
			url := awstest.NewQueue(t, true)
			sender, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"events.fifo": url}, 0)
			require.NoError(t, err)
			e, err := outbox.New(store, sender, policy)
			require.NoError(t, err)

			// Phase 1: the key at place 1 of order-38, delivered and deleted.
			created := outflow.Row{Key: "order-38-created", Queue: "events.fifo", Group: "order-38", Payload: []byte(`{"e":"created"}`)}
			_, err = p.Put(ctx, created)
			if tc.lostAnswer {
				require.Error(t, err, "the answer was lost; the transaction committed")
			} else {
				require.NoError(t, err)
			}
			_, err = e.Sweep(ctx)
			require.NoError(t, err)

			// Phase 2: the key again, then the next row of that group.
			again := created
			again.Group = tc.again
			_, err = p.Put(ctx, again)
			require.NoError(t, err)
			next := outflow.Row{Key: "next", Queue: "events.fifo", Group: tc.again, Payload: []byte(`{"e":"next"}`)}
			_, err = p.Put(ctx, next)
			require.NoError(t, err)
			for range 3 {
				_, err := e.Sweep(ctx)
				require.NoError(t, err)
			}
			require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "Outflow settled every row as delivered")

			// Phase 3: a GapWait consumer gets every place of the group.
			seen, outcomes := consumeGroups(t, url)
			t.Logf("places received by group: %v; outcomes: %v", seen, outcomes)
			wantPlace := int64(1)
			if tc.again == "order-38" {
				wantPlace = 2
			}
			require.Contains(t, seen[tc.again], wantPlace, "the key staged again never reached the consumer: SQS dropped it by its deduplication id")
			require.Contains(t, outcomes[next.Key], "applied", "the group's next place is refused as a gap for ever")
		})
	}
}

// consumeGroups runs a GapWait consumer on the queue for 8 s and returns
// the places it received, by group, and each key's outcomes.
func consumeGroups(t *testing.T, url string) (seen map[string][]int64, outcomes map[string][]string) {
	t.Helper()
	ctx := context.Background()
	ctable := awstest.UniqueName("restage-dedup")
	require.NoError(t, consume.CreateTable(ctx, awstest.DynamoDB(t), ctable))
	inbox, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: ctable, Consumer: "ledger"})
	require.NoError(t, err)
	var mu sync.Mutex
	seen, outcomes = map[string][]int64{}, map[string][]string{}
	pctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
		Closed: inbox.Close,
		Apply: func(ctx context.Context, m consume.Message) error {
			err := inbox.Apply(ctx, m, logEffect(t, ctable, m.Group, m.Key))
			mu.Lock()
			defer mu.Unlock()
			seen[m.Group] = append(seen[m.Group], m.Seq)
			outcome := "applied"
			switch {
			case errors.Is(err, consume.ErrDuplicate):
				outcome = "duplicate"
			case errors.Is(err, consume.ErrGap):
				outcome = "gap"
			case err != nil:
				outcome = fmt.Sprint(err)
			}
			outcomes[m.Key] = append(outcomes[m.Key], outcome)
			return err
		}}
	require.NoError(t, poller.Run(pctx))
	mu.Lock()
	defer mu.Unlock()
	return seen, outcomes
}
