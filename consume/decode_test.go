package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

const traceParent = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"

// lambdaRecord is a received message as Lambda's SQS event gives it.
func lambdaRecord(m types.Message, queueARN string) events.SQSMessage {
	rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
		Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSourceARN: queueARN, EventSource: "aws:sqs",
		MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for k, v := range m.MessageAttributes {
		rec.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: aws.ToString(v.DataType)}
	}
	return rec
}

// deliver sends rows over route to target with Outflow's deliverer, as the
// dispatcher would.
func deliver(t *testing.T, c delivery.Clients, route, target string, rows ...outbox.Row) {
	t.Helper()
	r, err := delivery.New(c, delivery.Routes{route: target}, 0)
	require.NoError(t, err)
	for _, err := range r.Deliver(context.Background(), route, rows) {
		require.NoError(t, err)
	}
}

// sent are rows covering what a message can carry: text and binary
// payloads, attributes, a trace, and a place in an ordered group.
func sent() []outbox.Row {
	return []outbox.Row{
		{Key: "k1", Group: "g", Payload: []byte(`{"amount":5}`), Attempt: 1, Seq: 1,
			Attributes: map[string]string{"type": "paid", delivery.AttrTraceParent: traceParent}},
		{Key: "k2", Group: "g", Payload: []byte{0xff, 0x00, 0x01}, Attempt: 3, Seq: 2, Prev: "k1"},
		{Key: "k3", Group: "g", Payload: []byte("plain text"), Attempt: 2},
	}
}

// requireDecoded checks each received message against the row sent,
// through both decoders.
func requireDecoded(t *testing.T, rows []outbox.Row, got []types.Message, queueARN string, env consume.Envelope, fifo bool) {
	t.Helper()
	require.Len(t, got, len(rows))
	for i, raw := range got {
		fromSDK, err := consume.FromSQS(raw)
		require.NoError(t, err)
		fromLambda, err := consume.FromLambda(lambdaRecord(raw, queueARN))
		require.NoError(t, err)
		for j, m := range []consume.Message{fromSDK, fromLambda} {
			row := rows[i]
			require.Equal(t, row.Key, m.Key)
			require.Equal(t, row.Payload, m.Payload)
			require.Equal(t, row.Attempt, m.Attempt)
			if j == 1 && !fifo {
				// Lambda names the queue, and a standard queue keeps no
				// order: the place and the group are not given.
				require.False(t, m.Ordered())
				require.Empty(t, m.Group)
			} else {
				require.Equal(t, row.Seq, m.Seq)
			}
			require.Equal(t, env, m.Envelope)
			require.Equal(t, row.Attributes[delivery.AttrTraceParent], m.TraceParent)
			want := map[string]string{}
			for k, v := range row.Attributes {
				if k != delivery.AttrTraceParent {
					want[k] = v
				}
			}
			require.Equal(t, want, m.Attributes)
			require.Equal(t, aws.ToString(raw.MessageId), m.MessageID)
			if fifo {
				require.Equal(t, row.Group, m.Group)
			}
		}
		if env != consume.EnvelopeSNS {
			require.Equal(t, queueARN, fromLambda.Route, "a Lambda record names its queue")
		}
	}
}

func TestFromSQS_DecodesWhatAQueueRouteSends(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		url := awstest.NewQueue(t, fifo)
		rows := sent()
		deliver(t, delivery.Clients{SQS: awstest.SQS(t)}, "r", url, rows...)
		requireDecoded(t, rows, awstest.Receive(t, url, len(rows), 20*time.Second), awstest.QueueARN(t, url), consume.EnvelopeSQS, fifo)
	}
}

func TestFromSQS_DecodesWhatATopicPassesToARawSubscriber(t *testing.T) {
	t.Parallel()
	topic := awstest.NewTopic(t, true)
	url := awstest.Subscribe(t, topic, true)
	rows := sent()
	deliver(t, delivery.Clients{SNS: awstest.SNS(t)}, "r", topic, rows...)
	requireDecoded(t, rows, awstest.Receive(t, url, len(rows), 20*time.Second), awstest.QueueARN(t, url), consume.EnvelopeSQS, true)
}

func TestFromSQS_DecodesSNSsEnvelope(t *testing.T) {
	t.Parallel()
	topic := awstest.NewTopic(t, false)
	url := awstest.NewQueue(t, false)
	_, err := awstest.SNS(t).Subscribe(context.Background(), &sns.SubscribeInput{
		TopicArn: aws.String(topic), Protocol: aws.String("sqs"), Endpoint: aws.String(awstest.QueueARN(t, url)),
	})
	require.NoError(t, err)
	rows := sent()
	deliver(t, delivery.Clients{SNS: awstest.SNS(t)}, "r", topic, rows...)
	got := awstest.Receive(t, url, len(rows), 20*time.Second)
	requireDecoded(t, rows, got, awstest.QueueARN(t, url), consume.EnvelopeSNS, false)
	m, err := consume.FromSQS(got[0])
	require.NoError(t, err)
	require.Equal(t, topic, m.Route, "the envelope names its topic")
}

func TestFromSQS_DecodesAnEventARuleSentToAQueue(t *testing.T) {
	t.Parallel()
	bus, busARN := awstest.NewBus(t)
	url := awstest.RouteEvents(t, bus, "app.orders")
	rows := []outbox.Row{
		{Key: "e1", Attempt: 2, Payload: []byte(`{"order":1,"items":[1,2],"note":"a<b"}`),
			Attributes: map[string]string{delivery.AttrTraceParent: traceParent, "tenant": "t1"}},
		{Key: "e2", Attempt: 1, Payload: []byte(`{}`), Attributes: map[string]string{delivery.AttrDetailType: "Other"}},
	}
	deliver(t, delivery.Clients{EventBridge: awstest.EventBridge(t)}, "domain", busARN+"?source=app.orders&detail-type=OrderPlaced", rows...)
	got := awstest.Receive(t, url, len(rows), 20*time.Second)
	require.Len(t, got, len(rows))
	byKey := map[string][]consume.Message{}
	for _, raw := range got {
		a, err := consume.FromSQS(raw)
		require.NoError(t, err)
		b, err := consume.FromLambda(lambdaRecord(raw, "arn"))
		require.NoError(t, err)
		byKey[a.Key] = []consume.Message{a, b}
	}
	for _, m := range byKey["e1"] {
		require.Equal(t, consume.EnvelopeEventBridge, m.Envelope)
		require.Equal(t, 2, m.Attempt)
		require.JSONEq(t, string(rows[0].Payload), string(m.Payload), "the payload is the detail without Outflow's member")
		require.Equal(t, traceParent, m.TraceParent)
		require.Equal(t, map[string]string{"tenant": "t1", "source": "app.orders", "detail-type": "OrderPlaced"}, m.Attributes)
	}
	for _, m := range byKey["e2"] {
		require.JSONEq(t, `{}`, string(m.Payload))
		require.Equal(t, "Other", m.Attributes["detail-type"])
	}
}
