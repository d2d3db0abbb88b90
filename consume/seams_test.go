package consume_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/target"
)

func TestInbox_AMessageItsGroupWentPastFollowsTheLatePolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		late    consume.LatePolicy
		wantErr error
		balance int
		history []string
	}{
		{"record, the default, applies nothing", consume.LateRecord, consume.ErrLate, 2, []string{"k1", "k3"}},
		{"apply applies it out of order", consume.LateApply, nil, 3, []string{"k1", "k3", "k2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			table := newTable(t)
			in, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "ledger", Gaps: consume.GapPass, Late: tt.late})
			require.NoError(t, err)
			require.NoError(t, in.Apply(ctx, ordered("k1", 1), credit(t, table, "a", "k1", 1)))
			require.NoError(t, in.Apply(ctx, ordered("k3", 3), credit(t, table, "a", "k3", 1)), "GapPass passes place 2")

			err = in.Apply(ctx, ordered("k2", 2), credit(t, table, "a", "k2", 1))
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.wantErr)
				var order *consume.OrderError
				require.ErrorAs(t, err, &order)
				require.Equal(t, int64(3), order.Cursor, "where the group was")
			}
			require.ErrorIs(t, in.Apply(ctx, ordered("k2", 2), credit(t, table, "a", "k2", 1)), consume.ErrDuplicate,
				"a late message is recorded once: its copies are duplicates, never retried")
			require.NoError(t, in.Apply(ctx, ordered("k4", 4), credit(t, table, "a", "k4", 1)),
				"the cursor stayed at 3 whatever became of the late place")

			balance, history := account(t, table, "a")
			require.Equal(t, tt.balance+1, balance)
			require.Equal(t, append(tt.history, "k4"), history)
			out, err := awstest.DynamoDB(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: &table,
				Key: map[string]types.AttributeValue{consume.AttrPK: &types.AttributeValueMemberS{Value: "inbox ledger k2"}}, ConsistentRead: aws.Bool(true)})
			require.NoError(t, err)
			require.Equal(t, "3", out.Item["late_after"].(*types.AttributeValueMemberN).Value, "the inbox item says it came late")
		})
	}
}

// fifoRecord is a Lambda record of a FIFO queue: a row at place seq of
// group g, or with closed set a message closing that place.
func fifoRecord(key string, seq int, closed string) events.SQSMessage {
	rec := record(key, "g")
	rec.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:events.fifo"
	s := strconv.Itoa(seq)
	rec.MessageAttributes[delivery.AttrSeq] = events.SQSMessageAttribute{StringValue: &s, DataType: "Number"}
	if closed != "" {
		rec.MessageAttributes[target.AttrClosed] = events.SQSMessageAttribute{StringValue: &closed, DataType: "String"}
		rec.Body = target.ClosedBody
	}
	return rec
}

func TestHandler_GivesMarkersToClosedAndAcknowledgesLateMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in, table := newInbox(t, consume.GapWait)
	var applied []string
	h := consume.Handler{
		Apply: func(ctx context.Context, m consume.Message) error {
			require.Empty(t, m.Closed, "Apply never sees a marker")
			applied = append(applied, m.Key)
			return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1))
		},
		Closed: in.Close,
	}
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		fifoRecord("k1", 1, ""), fifoRecord("k2", 2, target.ClosedPurged), fifoRecord("k3", 3, ""),
	}})
	require.NoError(t, err)
	require.Empty(t, failedIDs(resp), "the closed place lets place 3 apply in turn")
	resp, err = h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{fifoRecord("k2", 2, "")}})
	require.NoError(t, err)
	require.Empty(t, failedIDs(resp), "the row of a closed place, redriven, comes late: recorded and acknowledged, never retried")
	_, history := account(t, table, "a")
	require.Equal(t, []string{"k1", "k3"}, history)
	require.Equal(t, []string{"k1", "k3", "k2"}, applied)

	var logs, metrics bytes.Buffer
	var reasons []error
	unwired := consume.Handler{Apply: h.Apply, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: &metrics,
		OnFailure: func(_ context.Context, _ string, err error) { reasons = append(reasons, err) }}
	resp, err = unwired.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{fifoRecord("k9", 9, target.ClosedPurged), fifoRecord("k10", 10, "")}})
	require.NoError(t, err)
	require.Equal(t, []string{"id-k9", "id-k10"}, failedIDs(resp), "without Closed a marker is never acknowledged unread, and its group waits behind it")
	require.ErrorIs(t, reasons[0], consume.ErrNoClosedHook)
	require.Contains(t, logs.String(), "level=ERROR", "it is logged")
	require.Contains(t, metrics.String(), `"ClosingMessagesWithoutHook":1,"Queue":"events.fifo"`, "and counted")

	acked := consume.Handler{Apply: h.Apply, Closed: consume.AckClosed}
	resp, err = acked.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{fifoRecord("k9", 9, target.ClosedPurged)}})
	require.NoError(t, err)
	require.Empty(t, failedIDs(resp), "AckClosed acknowledges it unread, by choice")
}

func TestFromLambda_AGroupOnAQueueThatIsNotFIFOKeepsNoOrder(t *testing.T) {
	t.Parallel()
	// A fair queue: a standard queue whose messages carry a group.
	rec := fifoRecord("k2", 2, "")
	rec.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:events"
	m, err := consume.FromLambda(rec)
	require.NoError(t, err)
	require.False(t, m.Ordered())
	require.Empty(t, m.Group)

	in, table := newInbox(t, consume.GapPass)
	ctx := context.Background()
	require.NoError(t, in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)))
	first := fifoRecord("k1", 1, "")
	first.EventSourceARN = rec.EventSourceARN
	m1, err := consume.FromLambda(first)
	require.NoError(t, err)
	require.NoError(t, in.Apply(ctx, m1, credit(t, table, "a", m1.Key, 1)), "place 1 after place 2 on a queue with no order: applied, not lost")
	_, history := account(t, table, "a")
	require.Equal(t, []string{"k2", "k1"}, history)
}

func TestFromQueue_TheQueueURLSaysWhetherOrderApplies(t *testing.T) {
	t.Parallel()
	msg := sqstypes.Message{MessageId: aws.String("m"), Body: aws.String("{}"),
		Attributes: map[string]string{"MessageGroupId": "g"},
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			delivery.AttrKey:     {DataType: aws.String("String"), StringValue: aws.String("k")},
			delivery.AttrAttempt: {DataType: aws.String("Number"), StringValue: aws.String("1")},
			delivery.AttrSeq:     {DataType: aws.String("Number"), StringValue: aws.String("2")},
		}}
	tests := []struct {
		name, url string
		group     string
		seq       int64
	}{
		{"a FIFO queue", "https://sqs.us-east-1.amazonaws.com/1/events.fifo", "g", 2},
		{"a fair queue: standard, with groups", "https://sqs.us-east-1.amazonaws.com/1/events", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := consume.FromQueue(tt.url, msg)
			require.NoError(t, err)
			require.Equal(t, tt.group, m.Group)
			require.Equal(t, tt.seq, m.Seq)
		})
	}
	unnamed, err := consume.FromSQS(msg)
	require.NoError(t, err)
	require.Equal(t, "g", unnamed.Group, "FromSQS, knowing no queue, trusts the group")
}
