package consume_test

// Adversarial review of package consume (TestAdv_*).

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// snsEnvelopeRecord is a Lambda record of a STANDARD queue (no
// MessageGroupId system attribute) holding an SNS JSON envelope of an
// ordered row published to a FIFO topic.
func snsEnvelopeRecord(id, key string, seq string) events.SQSMessage {
	body := `{"Type":"Notification","MessageId":"` + id + `","TopicArn":"arn:aws:sns:us-east-1:123456789012:t.fifo",` +
		`"Message":"{}","MessageGroupId":"g","MessageAttributes":{` +
		`"outflow.key":{"Type":"String","Value":"` + key + `"},` +
		`"outflow.attempt":{"Type":"Number","Value":"1"},` +
		`"outflow.seq":{"Type":"Number","Value":"` + seq + `"}}}`
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:standard-q"}
}

// Premise changed. The review held that a standard queue's message with
// a place must be refused with ErrNoGroup. Refusing would make a consumer
// of a standard queue subscribed to a FIFO topic impossible (every
// message refused), and what it lost was GapPass's reordering, not
// anything an unordered apply loses. The rule now: the queue, not the
// message, says whether order applies. From a queue known to keep no
// order (Lambda's event source ARN, the Poller's URL) a message has no
// group and no place and is applied unordered; the envelope's
// MessageGroupId is never read; and ErrNoGroup still refuses a message
// with a place from a queue not named and without its group.
func TestAdv_AnSNSEnvelopeOnAStandardQueueIsAppliedUnordered(t *testing.T) {
	t.Parallel()
	in, _ := newInbox(t, consume.GapPass)

	m, err := consume.FromLambda(snsEnvelopeRecord("m2", "k2", "2"))
	require.NoError(t, err)
	require.False(t, m.Ordered(), "a standard queue keeps no order: no place")
	require.Empty(t, m.Group, "the envelope's MessageGroupId is not the queue's")
	items, err := in.TransactItems(m)
	require.NoError(t, err)
	require.Len(t, items, 1, "the inbox item alone: no cursor")

	rec := snsEnvelopeRecord("m2", "k2", "2")
	unnamed, err := consume.FromSQS(sqstypes.Message{MessageId: aws.String(rec.MessageId), Body: aws.String(rec.Body)})
	require.NoError(t, err)
	require.Equal(t, int64(2), unnamed.Seq)
	_, err = in.TransactItems(unnamed)
	require.ErrorIs(t, err, consume.ErrNoGroup, "a place, no group, and no queue to say the order does not apply")
}

// What follows from the above with GapPass: the standard queue hands
// place 2 before place 1; place 2 passes place 1 as a gap, and place 1 is
// then refused for good (ErrPassed): its effect is never applied.
func TestAdv_GapPassOnAStandardQueueLosesAReorderedPlace(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapPass)
	m, err := consume.FromLambda(snsEnvelopeRecord("m2", "k2", "2"))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, in.Apply(ctx, m, credit(t, table, "a", m.Key, 2)))
	first, err := consume.FromLambda(snsEnvelopeRecord("m1", "k1", "1"))
	require.NoError(t, err)
	err = in.Apply(ctx, first, credit(t, table, "a", first.Key, 1))
	require.NoError(t, err, "place 1 arrived after place 2 on a standard queue: its effect is lost")
}

// Idempotency.begin's PutItem applied, its answer lost (a reset
// connection): the SDK sends it again, and the retry is refused by this
// very copy's own in-progress record, which begin takes for another
// copy's (ErrInProgress). The effect is not run, and every copy is then
// refused for the whole Hold. The store's claim has the same fix for its
// own lost answer (claimUpdate: heldBy(token)).
func TestAdv_IdempotencyBeginWhoseAnswerWasLostIsThisCopysOwnHold(t *testing.T) {
	t.Parallel()
	cfg := awstest.TestConfig(t)
	transport := awstest.LoseFirstAnswer("PutItem")
	cfg.HTTPClient = sdkhttp.Client(&http.Client{Transport: transport})
	table := newTable(t)
	idem, err := consume.NewIdempotency(dynamodb.NewFromConfig(cfg), consume.IdempotencyConfig{Table: table, Consumer: "mailer", Hold: time.Hour})
	require.NoError(t, err)
	var ran atomic.Int32
	err = idem.Do(context.Background(), consume.Message{Key: "k", Attempt: 1}, func(context.Context) error { ran.Add(1); return nil })
	require.True(t, transport.Lost(), "the in-progress put's answer was lost and the SDK sent it again")
	require.NoError(t, err, "the copy holds the record it wrote itself")
	require.EqualValues(t, 1, ran.Load())
}

// Hypothesis (held): the inbox transaction's answer lost, the SDK retries
// it; the retry is answered as the first (ClientRequestToken) or refused
// as a duplicate; either way the message is acknowledged and applied once.
func TestAdv_InboxTransactionWhoseAnswerWasLostIsAppliedOnce(t *testing.T) {
	t.Parallel()
	cfg := awstest.TestConfig(t)
	transport := awstest.LoseFirstAnswer("TransactWriteItems")
	cfg.HTTPClient = sdkhttp.Client(&http.Client{Transport: transport})
	table := newTable(t)
	in, err := consume.NewInbox(dynamodb.NewFromConfig(cfg), consume.InboxConfig{Table: table, Consumer: "ledger"})
	require.NoError(t, err)
	m := ordered("k1", 1)
	err = in.Apply(context.Background(), m, credit(t, table, "a", m.Key, 5))
	require.True(t, transport.Lost())
	if err != nil {
		require.ErrorIs(t, err, consume.ErrDuplicate)
	}
	balance, history := account(t, table, "a")
	require.Equal(t, 5, balance)
	require.Equal(t, []string{"k1"}, history)
}

// On an ordered route whose dead head blocks (consuming.md: GapWait "the
// default, for block routes"), an operator's documented cure for a
// blocked group is `outflow dead purge`. The review found the purged
// place was never sent, so a GapWait cursor waited for it for ever. Now
// the dispatcher sends a message closing the place in its turn
// (internal/outbox's purge tests show it sent); here, the consumer's
// half: without it place 3 waits, and once the place is closed, place 3
// applies.
func TestAdv_APurgedDeadHeadOnABlockRouteStallsAGapWaitConsumerForEver(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	ctx := context.Background()
	require.NoError(t, in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
	require.ErrorIs(t, in.Apply(ctx, ordered("k3", 3), credit(t, table, "a", "k3", 1)), consume.ErrGap,
		"place 2 is neither applied nor closed yet")
	closed := ordered("k2", 2)
	closed.Closed, closed.Payload = "purged", []byte(`{"outflow":"closed"}`)
	require.NoError(t, in.Close(ctx, closed))
	require.ErrorIs(t, in.Close(ctx, closed), consume.ErrDuplicate, "a copy of the marker")
	var err error
	for range 2 { // every redelivery of k3
		err = in.Apply(ctx, ordered("k3", 3), credit(t, table, "a", "k3", 1))
	}
	require.ErrorIs(t, err, consume.ErrDuplicate, "place 3 applied once, after the closed place 2")
	balance, history := account(t, table, "a")
	require.Equal(t, 2, balance, "the marker applied no effect")
	require.Equal(t, []string{"k1", "k3"}, history)
}

// Hypothesis (held): hostile SNS/EventBridge envelopes never panic and
// never decode as an ordered message without a valid place.
func TestAdv_HostileEnvelopesDecodeToTypedErrors(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{"Type":"Notification","Message":null}`,
		`{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"Binary","Value":"az=="}}}`,
		`{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k"},"outflow.attempt":{"Type":"Number","Value":"1"},"outflow.seq":{"Type":"Number","Value":"-1"}}}`,
		`{"Type":"Notification","Message":"x","MessageAttributes":{"outflow.key":{"Type":"String","Value":"k"},"outflow.attempt":{"Type":"Number","Value":"1"},"outflow.seq":{"Type":"Number","Value":"9223372036854775808"}}}`,
		`{"detail-type":"x","source":"s","detail":"{\"outflow\":{\"key\":\"k\",\"attempt\":1}}"}`,
		`{"detail-type":"x","source":"s","detail":{"outflow":null}}`,
		`{"detail-type":"x","source":"s","detail":{"outflow":{"key":"k","attempt":1.5}}}`,
		`{"detail-type":"x","source":"s","detail":{"outflow":{"key":"k","attempt":1},"outflow":{"key":"","attempt":1}}}`,
		`{"detail-type":"x","source":"s","detail":{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		`{"detail-type":"x","source":"s","detail":{"outflow":{"key":"k","attempt":1}`,
	}
	for _, b := range bodies {
		m, err := consume.FromLambda(events.SQSMessage{MessageId: "id", Body: b})
		if err == nil {
			require.False(t, m.Ordered(), "body %s", b)
			continue
		}
		var de *consume.DecodeError
		require.ErrorAs(t, err, &de, "body %s", b)
		require.True(t, errors.Is(err, consume.ErrMalformed) || errors.Is(err, consume.ErrNotOutflow))
	}
}

// Through moto: a FIFO topic with a STANDARD queue subscribed, enveloped
// (not raw). If the envelope carries MessageGroupId the decoded message
// gets a group although its queue keeps no order.
func TestAdv_FIFOTopicToStandardQueueEnvelopeHasNoGroup(t *testing.T) {
	t.Parallel()
	topic := awstest.NewTopic(t, true)
	url := awstest.NewQueue(t, false)
	_, err := awstest.SNS(t).Subscribe(context.Background(), &sns.SubscribeInput{
		TopicArn: aws.String(topic), Protocol: aws.String("sqs"), Endpoint: aws.String(awstest.QueueARN(t, url)),
	})
	if err != nil {
		t.Skipf("moto refuses a standard queue on a FIFO topic: %v", err)
	}
	rows := []outbox.Row{{Key: "k1", Group: "g", Seq: 1, Attempt: 1, Payload: []byte(`{}`)}}
	deliver(t, delivery.Clients{SNS: awstest.SNS(t)}, "r.fifo", topic, rows...)
	got := awstest.Receive(t, url, 1, 20*time.Second)
	require.Len(t, got, 1)
	t.Logf("system attributes: %v", got[0].Attributes)
	m, err := consume.FromQueue(url, got[0])
	require.NoError(t, err)
	require.False(t, m.Ordered(), "a standard queue keeps no order: no place")
	require.Empty(t, m.Group, "a standard queue keeps no order: no group, whatever the message carries")
}

// A dead letter of a skip route redriven after its successors went (the
// docs: "a dead letter you redrive under skip (its successors went before
// it)") reaches a GapPass consumer as ErrPassed, which Poller and Handler
// treat as a failure: it is received again and again, and on its FIFO
// queue every later message of its group waits behind it until the
// consumer queue's redrive policy takes it away (with none: for ever).
// The rows staged after the redrive are delivered by Outflow and never
// applied.
func TestAdv_ARedrivenSkipDeadLetterIsAPoisonThatStallsItsGroup(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapPass)
	url := awstest.NewQueue(t, true)
	row := func(key string, seq int64) outbox.Row {
		return outbox.Row{Key: key, Group: "g", Seq: seq, Attempt: 1, Payload: []byte(key)}
	}
	c := delivery.Clients{SQS: awstest.SQS(t)}
	deliver(t, c, "events.fifo", url, row("k1", 1))
	deliver(t, c, "events.fifo", url, row("k3", 3)) // k2 dead under skip: k3 goes
	deliver(t, c, "events.fifo", url, row("k2", 2)) // the operator redrives k2
	deliver(t, c, "events.fifo", url, row("k4", 4)) // the group goes on
	var outcomes sync.Map
	p := &consume.Poller{API: awstest.SQS(t), QueueURL: url, Visibility: time.Second, Wait: time.Second,
		Apply: func(ctx context.Context, m consume.Message) error {
			err := in.Apply(ctx, m, credit(t, table, "a", m.Key, 1))
			v, _ := outcomes.LoadOrStore(m.Key, &[]string{})
			s := v.(*[]string)
			if err == nil {
				*s = append(*s, "applied")
			} else {
				*s = append(*s, err.Error())
			}
			return err
		}}
	stop := runPoller(t, p)
	time.Sleep(8 * time.Second)
	require.NoError(t, stop())
	outcomes.Range(func(k, v any) bool { t.Logf("%s: %v", k, *v.(*[]string)); return true })
	_, history := account(t, table, "a")
	require.Contains(t, history, "k4", "k4, staged and delivered after the redrive, is never applied")
}
