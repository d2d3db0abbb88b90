package consume_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// record is a Lambda record of an Outflow message with key, in group on
// a FIFO queue (none: a standard queue).
func record(key, group string) events.SQSMessage {
	one := "1"
	k := key
	rec := events.SQSMessage{MessageId: "id-" + key, Body: "p", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q",
		MessageAttributes: map[string]events.SQSMessageAttribute{
			delivery.AttrKey: {StringValue: &k, DataType: "String"}, delivery.AttrAttempt: {StringValue: &one, DataType: "Number"}}}
	if group != "" {
		rec.Attributes = map[string]string{"MessageGroupId": group}
		rec.EventSourceARN += ".fifo"
	}
	return rec
}

// fair is rec as it arrives from a fair queue: a standard queue whose
// messages carry a group id, which holds no order.
func fair(rec events.SQSMessage) events.SQSMessage {
	rec.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:fair"
	return rec
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestHandler_ReportsFailuresWithoutBreakingAGroupsOrder(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	tests := []struct {
		name        string
		records     []events.SQSMessage
		fail        map[string]error
		wantApplied []string
		wantFailed  []string
	}{
		{"FIFO: a group's later messages are not applied after its failure; other groups go on",
			[]events.SQSMessage{record("a1", "a"), record("b1", "b"), record("a2", "a"), record("b2", "b"), record("a3", "a")},
			map[string]error{"a2": errBoom},
			[]string{"a1", "b1", "a2", "b2"}, []string{"id-a2", "id-a3"}},
		{"FIFO: a duplicate is done, not failed",
			[]events.SQSMessage{record("a1", "a"), record("a2", "a")},
			map[string]error{"a1": consume.ErrDuplicate},
			[]string{"a1", "a2"}, []string{}},
		{"FIFO: a message that is not Outflow's fails its group",
			[]events.SQSMessage{{MessageId: "junk", Body: "x", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q.fifo", Attributes: map[string]string{"MessageGroupId": "a"}}, record("a2", "a"), record("b1", "b")},
			nil, []string{"b1"}, []string{"junk", "id-a2"}},
		{"standard: each message stands alone",
			[]events.SQSMessage{record("k1", ""), record("k2", ""), record("k3", "")},
			map[string]error{"k1": errBoom},
			[]string{"k1", "k2", "k3"}, []string{"id-k1"}},
		{"a fair queue (standard, with group ids): each message stands alone",
			[]events.SQSMessage{fair(record("k1", "g")), fair(record("k2", "g")), fair(record("k3", "g"))},
			map[string]error{"k1": errBoom},
			[]string{"k1", "k2", "k3"}, []string{"id-k1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			applied := []string{}
			reasons := map[string]error{}
			h := consume.Handler{
				Apply: func(_ context.Context, m consume.Message) error {
					applied = append(applied, m.Key)
					return tt.fail[m.Key]
				},
				OnFailure: func(_ context.Context, id string, err error) { reasons[id] = err },
			}
			resp, err := h.Handle(context.Background(), events.SQSEvent{Records: tt.records})
			require.NoError(t, err)
			require.Equal(t, tt.wantApplied, applied)
			require.Equal(t, tt.wantFailed, failedIDs(resp))
			require.Len(t, reasons, len(tt.wantFailed))
		})
	}
}

func TestHandler_ReportsEveryMessageNotAppliedOnceItsContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	h := consume.Handler{Apply: func(context.Context, consume.Message) error { cancel(); return nil }}
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record("k1", ""), record("k2", ""), record("k3", "b")}})
	require.NoError(t, err)
	require.Equal(t, []string{"id-k2", "id-k3"}, failedIDs(resp))
}

// On moto: ordered rows of two groups reach a FIFO queue through Outflow's
// deliverer; the handler applies them through the Inbox while one effect
// fails once. What it reports failed comes back, and in the end each
// group is applied once, in order.
func TestHandler_AppliesAFIFOQueuesGroupsOnceInOrderThroughTheInbox(t *testing.T) {
	t.Parallel()
	in, table := newInbox(t, consume.GapWait)
	url := awstest.NewQueue(t, true)
	var rows []outbox.Row
	for i := int64(1); i <= 4; i++ {
		for _, g := range []string{"a", "b"} {
			key := g + strconv.FormatInt(i, 10)
			rows = append(rows, outbox.Row{Key: key, Group: g, Seq: i, Attempt: 1, Payload: []byte(key)})
		}
	}
	deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "events.fifo", url, rows...)

	failOnce := map[string]bool{"a2": true}
	h := consume.Handler{Apply: func(ctx context.Context, m consume.Message) error {
		if failOnce[m.Key] {
			failOnce[m.Key] = false
			return errors.New("the effect's store is down")
		}
		return in.Apply(ctx, m, credit(t, table, m.Group, m.Key, 1))
	}}
	client := awstest.SQS(t)
	ctx := context.Background()
	arn := awstest.QueueARN(t, url)
	done := 0
	for round := 0; done < len(rows); round++ {
		require.Less(t, round, 50, "the queue stopped giving messages back")
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		require.NoError(t, err)
		event := events.SQSEvent{}
		for _, m := range out.Messages {
			event.Records = append(event.Records, lambdaRecord(m, arn))
		}
		resp, err := h.Handle(ctx, event)
		require.NoError(t, err)
		failed := map[string]bool{}
		for _, id := range failedIDs(resp) {
			failed[id] = true
		}
		// As Lambda does: delete what succeeded, and let the failures be
		// received again (at once here, not after the visibility timeout).
		for _, m := range out.Messages {
			if failed[aws.ToString(m.MessageId)] {
				_, err = client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			} else {
				done++
				_, err = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
			}
			require.NoError(t, err)
		}
	}
	for _, g := range []string{"a", "b"} {
		balance, history := account(t, table, g)
		require.Equal(t, 4, balance)
		require.Equal(t, []string{g + "1", g + "2", g + "3", g + "4"}, history)
	}
}
