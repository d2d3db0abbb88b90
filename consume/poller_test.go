package consume_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// countingSQS counts the visibility extensions that pass to the queue.
type countingSQS struct {
	*sqs.Client
	extensions atomic.Int32
}

func (c *countingSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out, err := c.Client.ChangeMessageVisibilityBatch(ctx, in, opts...)
	if err == nil {
		c.extensions.Add(1)
	}
	return out, err
}

// runPoller runs p until stop is called (at the latest when the test
// ends), which waits for Run to return and gives its error.
func runPoller(t *testing.T, p *consume.Poller) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	return stop
}

// On moto: ordered rows of two groups, one effect failing once. The
// poller applies every row once, each group in order, and deletes them.
func TestPoller_AppliesEachGroupOnceInOrder(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	url := awstest.NewQueue(t, true)
	var rows []outbox.Row
	for i := int64(1); i <= 5; i++ {
		for _, g := range []string{"a", "b"} {
			key := g + strconv.FormatInt(i, 10)
			rows = append(rows, outbox.Row{Key: key, Group: g, Seq: i, Attempt: 1, Payload: []byte(key)})
		}
	}
	deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "events.fifo", url, rows...)

	var mu sync.Mutex
	failOnce := map[string]bool{"a2": true}
	applied := make(chan string, 2*len(rows))
	var outOfTurn atomic.Int32
	p := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
		Apply: func(ctx context.Context, m consume.Message) error {
			mu.Lock()
			fail := failOnce[m.Key]
			failOnce[m.Key] = false
			mu.Unlock()
			if fail {
				return errors.New("the effect's store is down")
			}
			err := in.Apply(ctx, m, credit(t, table, m.Group, m.Key, 1))
			if err == nil {
				applied <- m.Key
			}
			if errors.Is(err, consume.ErrGap) {
				outOfTurn.Add(1)
			}
			return err
		}}
	stop := runPoller(t, p)
	for range rows {
		select {
		case <-applied:
		case <-time.After(time.Minute):
			require.Fail(t, "the poller stopped applying")
		}
	}
	require.NoError(t, stop())
	require.Zero(t, outOfTurn.Load(), "the poller gave no message before its group's earlier ones")
	for _, g := range []string{"a", "b"} {
		_, history := account(t, table, g)
		require.Equal(t, []string{g + "1", g + "2", g + "3", g + "4", g + "5"}, history)
	}
	require.Empty(t, awstest.Receive(t, url, 1, 2*time.Second), "every applied message was deleted")
}

// A message whose effect outlasts its visibility timeout stays invisible
// while the poller applies it; once the poller's context ends it finishes
// the message it started and deletes it.
func TestPoller_KeepsAMessageInvisibleWhileItIsAppliedAndFinishesItOnShutdown(t *testing.T) {
	t.Parallel()
	url := awstest.NewQueue(t, false)
	deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "q", url, outbox.Row{Key: "slow", Attempt: 1, Payload: []byte("p")})
	api := &countingSQS{Client: awstest.SQS(t)}
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	p := &consume.Poller{API: api, QueueURL: url, Visibility: 3 * time.Second, Wait: time.Second,
		Apply: func(context.Context, consume.Message) error {
			runs.Add(1)
			close(started)
			<-release
			return nil
		}}
	stop := runPoller(t, p)
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let) // runs before runPoller's: a failed test's poller finishes
	<-started
	// Three renewals of a third of the timeout each: the timeout asked at
	// the receive has passed.
	for deadline := time.Now().Add(time.Minute); api.extensions.Load() < 3; {
		require.True(t, time.Now().Before(deadline), "the poller stopped renewing the message's visibility")
		time.Sleep(50 * time.Millisecond)
	}
	out, err := api.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 0})
	require.NoError(t, err)
	require.Empty(t, out.Messages, "the message is still invisible")

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	let()
	require.NoError(t, <-stopped)
	require.EqualValues(t, 1, runs.Load())
	require.Empty(t, awstest.Receive(t, url, 1, 2*time.Second), "the message finished at shutdown was deleted")
}
