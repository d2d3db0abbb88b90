package consume_test

// The consume package held to the shared consumer vectors in
// conformance/consumer (decode.json: messages as received and what each
// decodes to; inbox.json: scenarios run on moto). The Python package's
// tests (python/tests/test_consume_conformance.py) read the same files: a
// vector one language fails is a bug in that language.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

type decodeVector struct {
	Name     string             `json:"name"`
	Shape    string             `json:"shape"`
	Record   *events.SQSMessage `json:"record"`
	Message  *sqstypes.Message  `json:"message"`
	QueueURL *string            `json:"queue_url"`
	Want     *struct {
		Key           string            `json:"key"`
		Route         string            `json:"route"`
		Group         string            `json:"group"`
		Seq           int64             `json:"seq"`
		Closed        string            `json:"closed"`
		Attempt       int               `json:"attempt"`
		Redriven      bool              `json:"redriven"`
		Payload       map[string]string `json:"payload"`
		Attributes    map[string]string `json:"attributes"`
		TraceParent   string            `json:"trace_parent"`
		Envelope      string            `json:"envelope"`
		MessageID     string            `json:"message_id"`
		ReceiptHandle string            `json:"receipt_handle"`
	} `json:"want"`
	Error *struct {
		Kind     string `json:"kind"`
		Envelope string `json:"envelope"`
	} `json:"error"`
}

// scenarioConfig is an Inbox's configuration as the inbox and poller
// scenarios give it.
type scenarioConfig struct {
	Gaps string `json:"gaps"`
	Late string `json:"late"`
	Join string `json:"join"`
}

// inbox is the InboxConfig of consumer c1 on table.
func (c scenarioConfig) inbox(table string) consume.InboxConfig {
	cfg := consume.InboxConfig{Table: table, Consumer: "c1"}
	if c.Gaps == "pass" {
		cfg.Gaps = consume.GapPass
	}
	if c.Late == "apply" {
		cfg.Late = consume.LateApply
	}
	if c.Join == "where_seen" {
		cfg.Join = consume.JoinWhereSeen
	}
	return cfg
}

type inboxScenario struct {
	Name    string                                `json:"name"`
	Config  scenarioConfig                        `json:"config"`
	Steps   []inboxStep                           `json:"steps"`
	Exact   bool                                  `json:"exact"`
	Effects []string                              `json:"effects"`
	Items   map[string]map[string]json.RawMessage `json:"items"`
}

type inboxStep struct {
	Op      string `json:"op"`
	PK      string `json:"pk"`
	Message struct {
		Key      string `json:"key"`
		Group    string `json:"group"`
		Seq      int64  `json:"seq"`
		Closed   string `json:"closed"`
		Redriven bool   `json:"redriven"`
	} `json:"message"`
	Outcome string `json:"outcome"`
	Cursor  *int64 `json:"cursor"`
}

func readConsumerFile(t *testing.T, name, member string) []json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "conformance", "consumer", name))
	require.NoError(t, err)
	var f map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &f))
	var out []json.RawMessage
	require.NoError(t, json.Unmarshal(f[member], &out))
	require.NotEmpty(t, out, "%s: no %s", name, member)
	return out
}

// readVectors decodes each entry of member in a consumer vector file as a T.
func readVectors[T any](t *testing.T, name, member string) []T {
	t.Helper()
	var out []T
	for _, raw := range readConsumerFile(t, name, member) {
		var v T
		require.NoError(t, json.Unmarshal(raw, &v))
		out = append(out, v)
	}
	return out
}

func decodeVectors(t *testing.T) []decodeVector {
	return readVectors[decodeVector](t, "decode.json", "vectors")
}

func inboxScenarios(t *testing.T) []inboxScenario {
	return readVectors[inboxScenario](t, "inbox.json", "scenarios")
}

func TestConformance_ConsumerVectorsAreAllThere(t *testing.T) {
	vs := decodeVectors(t)
	require.GreaterOrEqual(t, len(vs), 88)
	shapes, envelopes, kinds, errEnvelopes, closed := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, false
	for _, v := range vs {
		shapes[v.Shape] = true
		require.True(t, (v.Want == nil) != (v.Error == nil), v.Name)
		if v.Want != nil {
			envelopes[v.Want.Envelope] = true
			closed = closed || v.Want.Closed != ""
		} else {
			kinds[v.Error.Kind] = true
			errEnvelopes[v.Error.Envelope] = true
		}
	}
	require.Equal(t, map[string]bool{"lambda": true, "sdk": true}, shapes)
	require.Equal(t, map[string]bool{"sqs": true, "sns": true, "eventbridge": true}, envelopes)
	require.Equal(t, map[string]bool{"not_outflow": true, "malformed": true}, kinds)
	require.Equal(t, map[string]bool{"": true, "sqs": true, "sns": true, "eventbridge": true}, errEnvelopes)
	require.True(t, closed, "no closing message")
	for _, env := range []string{"sqs", "sns", "eventbridge"} {
		require.True(t, slices.ContainsFunc(vs, func(v decodeVector) bool { return v.Want != nil && v.Want.Redriven && v.Want.Envelope == env }), "no redriven %s message", env)
	}
	for _, env := range []string{"sqs", "sns"} {
		require.True(t, slices.ContainsFunc(vs, func(v decodeVector) bool {
			return v.Want != nil && v.Want.Redriven && v.Want.Closed != "" && v.Want.Envelope == env
		}), "no redriven closing message in the %s envelope", env)
	}

	ss := inboxScenarios(t)
	require.GreaterOrEqual(t, len(ss), 34)
	outcomes, gaps, lates, joins := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, s := range ss {
		gaps[s.Config.Gaps], lates[s.Config.Late], joins[s.Config.Join] = true, true, true
		for _, st := range s.Steps {
			if st.Outcome != "" {
				outcomes[st.Outcome] = true
			}
		}
	}
	for _, o := range []string{"applied", "duplicate", "gap", "late", "closed", "no_group"} {
		require.True(t, outcomes[o], "no step gives %s", o)
	}
	require.Equal(t, map[string]bool{"wait": true, "pass": true}, gaps)
	require.Equal(t, map[string]bool{"record": true, "apply": true}, lates)
	require.Equal(t, map[string]bool{"from_start": true, "where_seen": true}, joins)
	for _, s := range ss {
		require.True(t, s.Exact, "%s: not exact", s.Name)
	}
	require.True(t, slices.ContainsFunc(ss, func(s inboxScenario) bool {
		return s.Config.Join == "where_seen" && slices.ContainsFunc(s.Steps, func(st inboxStep) bool { return st.Message.Redriven })
	}), "no redriven row joining a group")
}

func TestConformance_Decode(t *testing.T) {
	for _, v := range decodeVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			var m consume.Message
			var err error
			switch {
			case v.Shape == "lambda":
				require.NotNil(t, v.Record)
				m, err = consume.FromLambda(*v.Record)
			case v.QueueURL != nil:
				m, err = consume.FromQueue(*v.QueueURL, *v.Message)
			default:
				m, err = consume.FromSQS(*v.Message)
			}
			if v.Error != nil {
				var de *consume.DecodeError
				require.ErrorAs(t, err, &de)
				want := map[string]error{"not_outflow": consume.ErrNotOutflow, "malformed": consume.ErrMalformed}[v.Error.Kind]
				require.ErrorIs(t, err, want)
				require.Equal(t, v.Error.Envelope, string(de.Envelope), err.Error())
				return
			}
			require.NoError(t, err)
			w := v.Want
			payload := []byte(w.Payload["text"])
			if b, ok := w.Payload["base64"]; ok {
				payload, err = base64.StdEncoding.DecodeString(b)
				require.NoError(t, err)
			}
			require.Equal(t, consume.Message{Key: w.Key, Route: w.Route, Group: w.Group, Seq: w.Seq, Closed: w.Closed, Attempt: w.Attempt, Redriven: w.Redriven,
				Payload: payload, Attributes: w.Attributes, TraceParent: w.TraceParent, Envelope: consume.Envelope(w.Envelope),
				MessageID: w.MessageID, ReceiptHandle: w.ReceiptHandle}, m)
		})
	}
}

// scenarioEffect appends the message's key to one item's list.
func scenarioEffect(table, key string) ddbtypes.TransactWriteItem {
	return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{
		TableName:                aws.String(table),
		Key:                      map[string]ddbtypes.AttributeValue{consume.AttrPK: &ddbtypes.AttributeValueMemberS{Value: "effects"}},
		UpdateExpression:         aws.String("SET #h = list_append(if_not_exists(#h, :empty), :k)"),
		ExpressionAttributeNames: map[string]string{"#h": "history"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":empty": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{}},
			":k":     &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{&ddbtypes.AttributeValueMemberS{Value: key}}},
		},
	}}
}

// scenarioOutcome names an Inbox outcome as the vectors do, with the
// cursor an *OrderError carries.
func scenarioOutcome(op string, err error) (string, *int64) {
	var order *consume.OrderError
	var cursor *int64
	if errors.As(err, &order) {
		cursor = &order.Cursor
	}
	switch {
	case err == nil && op == "close":
		return "closed", nil
	case err == nil:
		return "applied", nil
	case errors.Is(err, consume.ErrLate):
		return "late", cursor
	case errors.Is(err, consume.ErrDuplicate):
		return "duplicate", cursor
	case errors.Is(err, consume.ErrGap):
		return "gap", cursor
	case errors.Is(err, consume.ErrPassed):
		return "passed", cursor
	case errors.Is(err, consume.ErrNoGroup):
		return "no_group", nil
	}
	return "error: " + err.Error(), nil
}

func expectedAV(t *testing.T, raw json.RawMessage) ddbtypes.AttributeValue {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	switch v := v.(type) {
	case bool:
		return &ddbtypes.AttributeValueMemberBOOL{Value: v}
	case float64:
		return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(int64(v), 10)}
	case string:
		return &ddbtypes.AttributeValueMemberS{Value: v}
	}
	t.Fatalf("unexpected value %s", raw)
	return nil
}

func TestConformance_InboxScenarios(t *testing.T) {
	for _, s := range inboxScenarios(t) {
		t.Run(s.Name, func(t *testing.T) {
			ctx := context.Background()
			api := awstest.DynamoDB(t)
			table := newTable(t)
			in, err := consume.NewInbox(api, s.Config.inbox(table))
			require.NoError(t, err)
			for i, st := range s.Steps {
				if st.Op == "delete" {
					_, err := api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
						Key: map[string]ddbtypes.AttributeValue{consume.AttrPK: &ddbtypes.AttributeValueMemberS{Value: st.PK}}})
					require.NoError(t, err)
					continue
				}
				m := consume.Message{Key: st.Message.Key, Group: st.Message.Group, Seq: st.Message.Seq, Closed: st.Message.Closed, Redriven: st.Message.Redriven, Attempt: 1}
				if st.Op == "close" {
					err = in.Close(ctx, m)
				} else {
					err = in.Apply(ctx, m, scenarioEffect(table, m.Key))
				}
				got, cursor := scenarioOutcome(st.Op, err)
				require.Equal(t, st.Outcome, got, "step %d: %v", i, err)
				if st.Cursor != nil {
					require.NotNil(t, cursor, "step %d: %v", i, err)
					require.Equal(t, *st.Cursor, *cursor, "step %d: %v", i, err)
				}
			}
			get := func(pk string) map[string]ddbtypes.AttributeValue {
				out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
					Key: map[string]ddbtypes.AttributeValue{consume.AttrPK: &ddbtypes.AttributeValueMemberS{Value: pk}}})
				require.NoError(t, err)
				return out.Item
			}
			var history []string
			if item := get("effects"); item != nil {
				for _, v := range item["history"].(*ddbtypes.AttributeValueMemberL).Value {
					history = append(history, v.(*ddbtypes.AttributeValueMemberS).Value)
				}
			}
			want := s.Effects
			if len(want) == 0 {
				want = nil
			}
			require.Equal(t, want, history)
			for pk, attrs := range s.Items {
				item := get(pk)
				if attrs == nil {
					require.Nil(t, item, "%s: %v", pk, item)
					continue
				}
				require.NotNil(t, item, "%s is missing", pk)
				if s.Exact {
					var got, want []string
					for name := range item {
						if name != consume.AttrPK && name != "at" {
							got = append(got, name)
						}
					}
					for name, raw := range attrs {
						if string(raw) != "null" {
							want = append(want, name)
						}
					}
					require.ElementsMatch(t, want, got, "%s: the item's attributes", pk)
					require.IsType(t, &ddbtypes.AttributeValueMemberN{}, item["at"], "%s.at", pk)
				}
				for name, raw := range attrs {
					if string(raw) == "null" {
						require.NotContains(t, item, name, "%s.%s", pk, name)
						continue
					}
					require.Equal(t, expectedAV(t, raw), item[name], "%s.%s", pk, name)
				}
			}
		})
	}
}

type handlerBatch struct {
	Name       string              `json:"name"`
	Records    []events.SQSMessage `json:"records"`
	Results    map[string]string   `json:"results"`
	ClosedHook bool                `json:"closed_hook"`
	Failures   []string            `json:"failures"`
	Calls      []string            `json:"calls"`
	Outcomes   map[string]int      `json:"outcomes"`
}

func TestConformance_Handler(t *testing.T) {
	batches := readVectors[handlerBatch](t, "handler.json", "batches")
	require.GreaterOrEqual(t, len(batches), 13)
	require.True(t, slices.ContainsFunc(batches, func(b handlerBatch) bool {
		return !slices.ContainsFunc(consume.Outcomes, func(o consume.Outcome) bool { return b.Outcomes[string(o)] == 0 })
	}), "no batch holds every outcome")
	for _, b := range batches {
		t.Run(b.Name, func(t *testing.T) {
			var calls []string
			result := func(key string) error {
				switch b.Results[key] {
				case "error":
					return errors.New("the effect failed")
				case "gap":
					return &consume.OrderError{Key: key, Group: "g1", Place: 2, Cursor: 0}
				case "duplicate":
					return consume.ErrDuplicate
				case "late":
					return errors.Join(consume.ErrLate, &consume.OrderError{Key: key, Place: 1, Cursor: 5})
				}
				return nil
			}
			var counts consume.Counts
			var metrics bytes.Buffer
			h := consume.Handler{Logger: slog.New(slog.DiscardHandler), Metrics: &metrics, OnResult: counts.Add, Apply: func(_ context.Context, m consume.Message) error {
				calls = append(calls, m.Key)
				return result(m.Key)
			}}
			if b.ClosedHook {
				h.Closed = func(_ context.Context, m consume.Message) error {
					calls = append(calls, "closed:"+m.Key)
					return result(m.Key)
				}
			}
			resp, err := h.Handle(context.Background(), events.SQSEvent{Records: b.Records})
			require.NoError(t, err)
			var failures []string
			for _, f := range resp.BatchItemFailures {
				failures = append(failures, f.ItemIdentifier)
			}
			got := map[string][]string{"failures": failures, "calls": calls}
			want := map[string][]string{"failures": b.Failures, "calls": b.Calls}
			for k, v := range want {
				if len(v) == 0 {
					want[k] = nil
				}
			}
			require.Equal(t, want, got)

			counted := map[string]int{}
			for _, o := range consume.Outcomes {
				if n := counts.Of(o); n > 0 {
					counted[string(o)] = n
				}
			}
			require.NotEmpty(t, b.Outcomes, "the batch counts no outcomes")
			require.Equal(t, b.Outcomes, counted, "the outcomes OnResult heard")
			arn := b.Records[0].EventSourceARN
			line := batchLine(t, metrics.String(), arn[strings.LastIndex(arn, ":")+1:])
			for _, o := range consume.Outcomes {
				require.EqualValues(t, b.Outcomes[string(o)], line[consume.MetricName(o)], "the EMF line's %s", consume.MetricName(o))
			}
		})
	}
}

// batchLine is the EMF line of a Handler's batch among the lines
// written (a closing message with no hook adds its own): the one that
// counts Applied.
func batchLine(t *testing.T, written, queue string) map[string]any {
	t.Helper()
	var found map[string]any
	for line := range strings.Lines(written) {
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &doc), line)
		if _, ok := doc["Applied"]; ok {
			require.Nil(t, found, "two batch lines for one batch")
			found = doc
		}
	}
	require.NotNil(t, found, "no batch line in %q", written)
	require.Equal(t, queue, found["Queue"], "its Queue dimension")
	return found
}
