package outflow_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// syncBuffer is output goroutines write while the test reads it.
type syncBuffer = awstest.SyncBuffer

// A consumer written to 0.1.0's first recipe (an Inbox used inside Apply,
// no Closed hook, a Poller on SQS queues) meets every kind of message the
// current dispatcher sends to SQS: ordered rows, unordered rows, the
// closing message of a dead letter under skip and of a dead head an
// operator purged under block. (The Lambda Handler's path, and the SNS
// and EventBridge envelopes, are held to the same outcome by the shared
// handler vectors and the decode vectors, in Go, Python and TypeScript.)
// 0.1.0 acknowledged the closing messages unread, and the two groups
// behind them stalled for ever with nothing said anywhere (issue 49
// measured 2 of 4 groups). Now each group either moves to its end or
// fails loudly: the closing message is reported with
// consume.ErrNoClosedHook, logged at ERROR and counted as an EMF metric,
// each naming the queue. Once the hook is set, as the upgrade note says,
// the same messages (never acknowledged) are received again and every
// group reaches its end, each effect once.
func TestUpgrade_AConsumerWiredToTheFirstRecipeNeverStallsInSilence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	const blockRoute, skipRoute, plainRoute = "payments.fifo", "notices.fifo", "audit"
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: 4, Ordered: []string{blockRoute, skipRoute}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.MaxAttempts = 1
	policy.Ordered = map[string]outbox.DeadHead{blockRoute: outbox.DeadHeadBlock, skipRoute: outbox.DeadHeadSkip}
	urls := map[string]string{blockRoute: awstest.NewQueue(t, true), skipRoute: awstest.NewQueue(t, true), plainRoute: awstest.NewQueue(t, false)}
	router, err := delivery.New(delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes(urls), 0)
	require.NoError(t, err)

	// The groups: one whose dead head is purged (block), one whose dead
	// letter is skipped past (skip), one with nothing wrong, and
	// unordered rows.
	type group struct{ route, name string }
	groups := []group{{blockRoute, "purged"}, {skipRoute, "skipped"}, {blockRoute, "fine"}}
	bad := map[string]bool{"purged-2": true, "skipped-2": true}
	var effects []string // the keys whose effect must be applied, once each
	t.Run("the dispatcher sends every kind of message", func(t *testing.T) {
		for _, g := range groups {
			for i := 1; i <= 3; i++ {
				key := fmt.Sprintf("%s-%d", g.name, i)
				_, err := p.Put(ctx, outflow.Row{Key: key, Queue: g.route, Group: g.name, Payload: []byte(`{}`)})
				require.NoError(t, err)
				if !bad[key] {
					effects = append(effects, key)
				}
			}
		}
		for _, key := range []string{"audit-1", "audit-2"} {
			_, err := p.Put(ctx, outflow.Row{Key: key, Queue: plainRoute, Payload: []byte(`{}`)})
			require.NoError(t, err)
			effects = append(effects, key)
		}
		e, err := outbox.New(store, refusing{next: router, keys: bad}, policy)
		require.NoError(t, err)
		for range 2 {
			_, err := e.Sweep(ctx)
			require.NoError(t, err)
		}
		op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
		require.NoError(t, err)
		res, err := operate.Purge(ctx, op, []string{"purged-2"}, operate.Selection{}, time.Now(), operate.Hold{Now: time.Now(), Wait: policy.UnsureWait()}, func() {})
		require.NoError(t, err)
		require.Equal(t, 1, res.Done)
		e, err = outbox.New(store, router, policy)
		require.NoError(t, err)
		for range 2 {
			_, err := e.Sweep(ctx)
			require.NoError(t, err)
		}
		require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "Outflow has sent everything, both closing messages included")
	})

	ctable := awstest.UniqueName("recipe-consumer")
	require.NoError(t, consume.CreateTable(ctx, awstest.DynamoDB(t), ctable))
	inbox, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: ctable, Consumer: "ledger", Gaps: consume.GapWait})
	require.NoError(t, err)
	// The recipe's Apply: the effect and the inbox in one transaction.
	apply := func(ctx context.Context, m consume.Message) error {
		return inbox.Apply(ctx, m, logEffect(t, ctable, "all", m.Key))
	}
	var mu sync.Mutex
	var failures []error
	logs, metrics := &syncBuffer{}, &syncBuffer{}
	// consumeUntil runs a poller on each queue until done holds, or fails
	// the test after a minute: time enough on a loaded machine, and the
	// loop ends by itself.
	consumeUntil := func(t *testing.T, closed func(context.Context, consume.Message) error, done func() bool) {
		t.Helper()
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, url := range urls {
			poller := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
				Apply: apply, Closed: closed,
				Logger: slog.New(slog.NewTextHandler(logs, nil)), Metrics: metrics,
				OnFailure: func(_ context.Context, _ string, err error) {
					mu.Lock()
					defer mu.Unlock()
					failures = append(failures, err)
				}}
			wg.Go(func() { _ = poller.Run(pctx) })
		}
		deadline := time.Now().Add(time.Minute)
		for !done() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		require.True(t, done(), "the consumers did not get there within a minute")
	}
	cursor := func(g string) int64 {
		out, err := awstest.DynamoDB(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(ctable), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "cursor ledger " + g}}})
		require.NoError(t, err)
		n, ok := out.Item["seq"].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		var seq int64
		_, _ = fmt.Sscan(n.Value, &seq)
		return seq
	}
	applied := func() []string {
		out, err := awstest.DynamoDB(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(ctable), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "log all"}}})
		require.NoError(t, err)
		l, _ := out.Item["log"].(*types.AttributeValueMemberL)
		var keys []string
		if l != nil {
			for _, v := range l.Value {
				keys = append(keys, v.(*types.AttributeValueMemberS).Value)
			}
		}
		return keys
	}
	loudFor := func(g string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range failures {
			if errors.Is(err, consume.ErrNoClosedHook) && strings.Contains(err.Error(), fmt.Sprintf("group %q", g)) {
				return true
			}
		}
		return false
	}

	t.Run("wired the old way, every group moves or fails loudly", func(t *testing.T) {
		consumeUntil(t, nil, func() bool {
			return cursor("fine") == 3 && loudFor("purged") && loudFor("skipped") && len(applied()) >= 4
		})
		require.ElementsMatch(t, []string{"purged-1", "skipped-1", "fine-1", "fine-2", "fine-3", "audit-1", "audit-2"}, applied(),
			"what is not behind a closing message is applied, once")
		for _, g := range []string{"purged", "skipped"} {
			require.Equal(t, int64(1), cursor(g), "group %s waits at its closing message", g)
		}
		for _, url := range []string{urls[blockRoute], urls[skipRoute]} {
			queue := url[strings.LastIndex(url, "/")+1:]
			require.Contains(t, logs.String(), "level=ERROR msg=\"consume: closing message not acknowledged: no Closed hook\" queue="+queue,
				"the log names the queue")
			require.Contains(t, metrics.String(), `"ClosingMessagesWithoutHook":1,"Queue":"`+queue+`"`, "and so does the metric")
		}
	})

	t.Run("with the hook set, the same messages close their places", func(t *testing.T) {
		consumeUntil(t, inbox.Close, func() bool {
			return cursor("purged") == 3 && cursor("skipped") == 3 && cursor("fine") == 3 && len(applied()) >= len(effects)
		})
		require.ElementsMatch(t, effects, applied(), "every effect once, none for a closed place")
	})
}
