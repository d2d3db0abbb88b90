package consume_test

// The receive loop held to conformance/consumer/poller.json, which the
// Python and TypeScript suites read too: messages sent to a moto queue as
// Outflow sends them, consumed by a Poller bound to an Inbox.

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

type pollerMessage struct {
	Key    string `json:"key"`
	Group  string `json:"group"`
	Seq    int64  `json:"seq"`
	Closed string `json:"closed"`
}

type pollerScenario struct {
	Name        string          `json:"name"`
	Queue       string          `json:"queue"`
	Config      scenarioConfig  `json:"config"`
	Concurrency int             `json:"concurrency"`
	StopAt      string          `json:"stop_at"`
	Before      []pollerMessage `json:"before"`
	Send        []pollerMessage `json:"send"`
	Fail        []string        `json:"fail"`
	Want        struct {
		Outcomes map[string]int `json:"outcomes"`
		Effects  []string       `json:"effects"`
		Visible  int            `json:"visible"`
		InFlight int            `json:"in_flight"`
	} `json:"want"`
}

func pollerScenarios(t *testing.T) []pollerScenario {
	return readVectors[pollerScenario](t, "poller.json", "scenarios")
}

func TestConformance_PollerScenariosAreAllThere(t *testing.T) {
	t.Parallel()
	ss := pollerScenarios(t)
	require.GreaterOrEqual(t, len(ss), 4)
	for _, o := range consume.Outcomes {
		require.True(t, slices.ContainsFunc(ss, func(s pollerScenario) bool { return s.Want.Outcomes[string(o)] > 0 }), "no scenario gives %s", o)
	}
	require.True(t, slices.ContainsFunc(ss, func(s pollerScenario) bool { return s.StopAt != "" }), "no scenario stops mid-batch")
	require.True(t, slices.ContainsFunc(ss, func(s pollerScenario) bool { return s.Queue == "standard" }), "no scenario on a standard queue")
}

func TestConformance_PollerScenarios(t *testing.T) {
	t.Parallel()
	for _, s := range pollerScenarios(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, queues := awstest.DynamoDB(t), awstest.SQS(t)
			table := newTable(t)
			in, err := consume.NewInbox(db, s.Config.inbox(table))
			require.NoError(t, err)

			// Phase 1: the inbox's state before the queue's messages.
			for _, m := range s.Before {
				msg := consume.Message{Key: m.Key, Group: m.Group, Seq: m.Seq, Attempt: 1}
				require.NoError(t, in.Apply(ctx, msg, scenarioEffect(table, m.Key)), "before: %s", m.Key)
			}

			// Phase 2: the messages, sent as Outflow sends them.
			fifo := s.Queue == "fifo"
			url := awstest.NewQueue(t, fifo)
			for _, m := range s.Send {
				sendScenarioMessage(t, queues, url, fifo, m)
			}

			// Phase 3: the poller, until it has given every result.
			var mu sync.Mutex
			var counts consume.Counts
			results := 0
			want := 0
			for _, n := range s.Want.Outcomes {
				want += n
			}
			all := make(chan struct{})
			pctx, stop := context.WithCancel(ctx)
			defer stop()
			p := in.Poller(queues, url, func(_ context.Context, m consume.Message) ([]ddbtypes.TransactWriteItem, error) {
				if m.Key == s.StopAt {
					stop()
				}
				if slices.Contains(s.Fail, m.Key) {
					return nil, errors.New("the effect failed")
				}
				return []ddbtypes.TransactWriteItem{scenarioEffect(table, m.Key)}, nil
			})
			p.Wait, p.Visibility, p.Concurrency = time.Second, 30*time.Second, s.Concurrency
			p.OnResult = func(ctx context.Context, r consume.Result) {
				mu.Lock()
				defer mu.Unlock()
				counts.Add(ctx, r)
				results++
				if results == want {
					close(all)
				}
			}
			done := make(chan error, 1)
			go func() { done <- p.Run(pctx) }()
			select {
			case <-all:
			case <-done:
				require.NotEmpty(t, s.StopAt, "the poller returned unasked")
			case <-time.After(2 * time.Minute):
				t.Fatalf("the poller gave %d of %d results: %+v", results, want, counts)
			}
			stop()
			require.NoError(t, <-done)

			// Phase 4: what it counted, committed and left in the queue.
			got := map[string]int{}
			for _, o := range consume.Outcomes {
				if n := counts.Of(o); n > 0 {
					got[string(o)] = n
				}
			}
			require.Equal(t, s.Want.Outcomes, got, "outcomes")
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]ddbtypes.AttributeValue{consume.AttrPK: &ddbtypes.AttributeValueMemberS{Value: "effects"}}})
			require.NoError(t, err)
			var effects []string
			if h, ok := out.Item["history"].(*ddbtypes.AttributeValueMemberL); ok {
				for _, v := range h.Value {
					effects = append(effects, v.(*ddbtypes.AttributeValueMemberS).Value)
				}
			}
			slices.Sort(effects)
			require.Equal(t, s.Want.Effects, effects, "effects")
			attrs, err := queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(s.Want.Visible), attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], "visible")
			require.Equal(t, strconv.Itoa(s.Want.InFlight), attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], "in flight")
		})
	}
}

// sendScenarioMessage sends m as Outflow would.
func sendScenarioMessage(t *testing.T, api *sqs.Client, url string, fifo bool, m pollerMessage) {
	t.Helper()
	attrs := map[string]sqstypes.MessageAttributeValue{
		"outflow.key":     {DataType: aws.String("String"), StringValue: aws.String(m.Key)},
		"outflow.attempt": {DataType: aws.String("Number"), StringValue: aws.String("1")},
	}
	if m.Seq != 0 {
		attrs["outflow.seq"] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(m.Seq, 10))}
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"key":"` + m.Key + `"}`), MessageAttributes: attrs}
	dedup := m.Key
	if m.Closed != "" {
		attrs["outflow.closed"] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.Closed)}
		dedup += "-closed"
	}
	if fifo {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(m.Group), aws.String(dedup)
	}
	_, err := api.SendMessage(context.Background(), in)
	require.NoError(t, err)
}
