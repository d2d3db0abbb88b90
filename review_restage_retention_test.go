package outflow_test

// From the adversarial review of issue 38: a producer's retry that comes after
// the done row's tombstone expired.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// restageWire records what the dispatcher sends, in order, as the consumer
// decodes it: key, group, place and closing reason. (A FIFO queue would
// drop a key sent twice within 5 minutes by its deduplication id; past
// the done retention, the case here, it is long out of that window.)
type restageWire struct {
	mu   sync.Mutex
	sent []consume.Message
}

func (w *restageWire) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		w.sent = append(w.sent, consume.Message{Key: r.Key, Group: r.Group, Seq: r.Seq, Closed: r.Closed, Attempt: max(r.Attempt, 1), Payload: r.Payload})
	}
	return make([]error, len(rows))
}

func (w *restageWire) messages() []consume.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]consume.Message(nil), w.sent...)
}

// TestReview_AKeyStagedAgainPastItsRetentionIsAppliedOnceAndDoesNotStallTheConsumer:
// a Put whose answer was lost is retried after the done row's retention
// (24 h by default; DynamoDB's TTL deletes the tombstone some time after).
// Outflow documents that past the window "a key is free again and a row
// staged under it is a new row": the retry stages the key at the group's
// next place (2), and the group's next row goes at place 3. Outflow
// delivers both. The consumer's Inbox keeps its items longer than Outflow
// keeps done rows (the docs' example TTL is 30 days, and consuming.md asks
// for "longer than any copy can come late"), so it refuses place 2 as a
// duplicate of place 1's key and never moves its cursor: place 3 is
// refused with ErrGap on every delivery, for ever. Place 2 reached the
// consumer but was neither applied nor closed.
func TestReview_AKeyStagedAgainPastItsRetentionIsAppliedOnceAndDoesNotStallTheConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	db := awstest.DynamoDB(t)
	api := &lostResponseAPI{API: db}
	p, err := outflow.NewProducer(api, outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(db, dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadBlock}
	wire := &restageWire{}
	e, err := outbox.New(store, wire, policy)
	require.NoError(t, err)

	created := outflow.Row{Key: "order-5-created", Queue: "events.fifo", Group: "order-5", Payload: []byte(`{"e":"created"}`)}
	_, err = p.Put(ctx, created)
	require.Error(t, err, "the answer was lost; the transaction committed")
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	done, err := store.Get(ctx, created.Key)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusDone, done.Status, "the tombstone, kept for the retention")

	// The retention passes and DynamoDB's TTL deletes the tombstone.
	_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: created.Key}}})
	require.NoError(t, err)

	// The producer's own retry of the failed job, then the group's next row.
	_, err = p.Put(ctx, created)
	require.NoError(t, err)
	paid := outflow.Row{Key: "order-5-paid", Queue: "events.fifo", Group: "order-5", Payload: []byte(`{"e":"paid"}`)}
	_, err = p.Put(ctx, paid)
	require.NoError(t, err)
	for range 3 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Empty(t, awstest.DueKeys(t, store, time.Now().Add(time.Hour)), "Outflow delivered every row")
	sent := wire.messages()
	require.Len(t, sent, 3)
	require.Equal(t, []int64{1, 2, 3}, []int64{sent[0].Seq, sent[1].Seq, sent[2].Seq}, "the key staged again took place 2")

	// The consumer: an Inbox (GapWait, the default) with the docs' TTL.
	ctable := awstest.UniqueName("restage-consumer")
	require.NoError(t, consume.CreateTable(ctx, db, ctable))
	inbox, err := consume.NewInbox(db, consume.InboxConfig{Table: ctable, Consumer: "ledger", TTL: 30 * 24 * time.Hour})
	require.NoError(t, err)
	apply := func(m consume.Message) error {
		err := inbox.Apply(ctx, m, logEffect(t, ctable, m.Group, m.Key))
		if errors.Is(err, consume.ErrDuplicate) || errors.Is(err, consume.ErrLate) {
			return nil // acknowledged, as Handler and Poller do
		}
		return err
	}
	// Each message is retried until it is done, as a FIFO queue gives it
	// again; a handful of tries is as good as for ever here.
	for _, m := range sent {
		var err error
		for range 5 {
			if err = apply(m); err == nil {
				break
			}
		}
		require.NoError(t, err, "place %d (%s) is never done at the consumer: its group is stalled", m.Seq, m.Key)
	}
	// Each key's effect once, in order; place 2 closed, as restaged.
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(ctable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "log order-5"}}})
	require.NoError(t, err)
	var log struct{ Log []string }
	require.NoError(t, attributevalue.UnmarshalMap(out.Item, &log))
	require.Equal(t, []string{created.Key, paid.Key}, log.Log)
	out, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(ctable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "inbox ledger " + created.Key + " restaged order-5 2"}}})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberS{Value: consume.ClosedRestaged}, out.Item["closed"], "place 2 is recorded closed")
}

// refuseKeys refuses for good every message of the keys it names, the
// row's and its place's closing message alike (a queue whose KMS key the
// dispatcher lost access to refuses both), and records the rest.
type refuseKeys struct {
	wire *restageWire
	keys map[string]bool
}

func (r refuseKeys) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	for i, row := range rows {
		if r.keys[row.Key] {
			errs[i] = outbox.Permanent(errors.New("refused by the test"))
			continue
		}
		errs[i] = r.wire.Deliver(ctx, queue, []outbox.Row{row})[0]
	}
	return errs
}

// TestReview_ASkippedPlaceWhoseClosingMessageFailedHoldsItsGroupUntilAPurgeClosesIt
// (from the adversarial review of issue 38): on a skip route a row is
// refused for good, and so is the message that would close its place
// (closed = unsent). The group went on at once, so place 3 reached the
// consumer while place 2 had come neither as its row nor closed, and the
// purge deleted the row: a GapWait consumer waited for ever. Now such a
// dead letter holds its group under either policy, and a purge sends its
// closing message again, in its place.
func TestReview_ASkippedPlaceWhoseClosingMessageFailedHoldsItsGroupUntilAPurgeClosesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	db := awstest.DynamoDB(t)
	p, err := outflow.NewProducer(db, outflow.Config{Table: table, Shards: 4, Ordered: []string{"events.fifo"}})
	require.NoError(t, err)
	store, err := dynamo.New(db, dynamo.Config{Table: table, Shards: 4, DoneRetention: dynamo.DefaultDoneRetention})
	require.NoError(t, err)
	policy := outbox.DefaultPolicy()
	policy.WakeGrace = 0
	policy.BatchLinger = 5 * time.Millisecond
	policy.MaxAttempts = 1
	policy.Ordered = map[string]outbox.DeadHead{"events.fifo": outbox.DeadHeadSkip}
	keys := []string{"order-6-created", "order-6-bad", "order-6-paid"}
	for _, k := range keys {
		_, err := p.Put(ctx, outflow.Row{Key: k, Queue: "events.fifo", Group: "order-6", Payload: []byte(`{"k":"` + k + `"}`)})
		require.NoError(t, err)
	}
	wire := &restageWire{}
	e, err := outbox.New(store, refuseKeys{wire: wire, keys: map[string]bool{keys[1]: true}}, policy)
	require.NoError(t, err)
	for range 3 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}
	dead, err := store.Get(ctx, keys[1])
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, dead.Status)
	require.Equal(t, outbox.ClosedUnsent, dead.Closed)

	// The operator purges it, as docs/reliability.md says closes it; the
	// dispatcher then sends what it has.
	op, err := dynamo.NewOperator(db, dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	res, err := operate.Purge(ctx, op, []string{keys[1]}, operate.Selection{}, time.Now(), operate.Hold{Now: time.Now(), Wait: policy.UnsureWait()}, func() {})
	require.NoError(t, err)
	require.Equal(t, 1, res.Done)
	e, err = outbox.New(store, wire, policy)
	require.NoError(t, err)
	for range 3 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
	}

	var places []string
	for _, m := range wire.messages() {
		places = append(places, fmt.Sprintf("%d%s", m.Seq, map[bool]string{true: "/closed:" + m.Closed}[m.Closed != ""]))
	}
	require.Equal(t, []string{"1", "2/closed:" + outbox.ClosedPurged, "3"}, places,
		"every place reaches the consumer, as its row or closed, in order: the group waited for the operator")
}
