package outflow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

const (
	testTraceParent = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	testRoutes      = "orders=http://localhost:1/000000000000/orders,notices=arn:aws:sns:us-east-1:123456789012:notices," +
		"fan.fifo=arn:aws:sns:us-east-1:123456789012:fan.fifo,domain=bus?source=app&detail-type=T,bare=arn:aws:events:us-east-1:123456789012:event-bus/bus"
)

// newRoutedProducer is a producer that knows the dispatcher's routes.
func newRoutedProducer(t *testing.T, maxBytes int) (*outflow.Producer, *dynamo.Store) {
	t.Helper()
	table := awstest.NewTable(t)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Routes: testRoutes, MaxMessageBytes: maxBytes, Ordered: []string{}})
	require.NoError(t, err)
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	return p, store
}

func TestPut_ChecksEachRowAgainstItsRoutesTarget(t *testing.T) {
	t.Parallel()
	p, _ := newRoutedProducer(t, 1024*1024)
	big := []byte(strings.Repeat("x", 300*1024))
	tests := []struct {
		name string
		row  outflow.Row
		want error // nil: staged
	}{
		{"a route not given", outflow.Row{Queue: "nowhere", Payload: []byte("x")}, outflow.ErrNoRoute},
		{"a queue takes 300 KiB when the limit is 1 MiB", outflow.Row{Queue: "orders", Payload: big}, nil},
		{"a topic keeps to SNS's 256 KiB", outflow.Row{Queue: "notices", Payload: big}, outflow.ErrPayloadTooLarge},
		{"a topic takes text", outflow.Row{Queue: "notices", Payload: []byte("hello")}, nil},
		{"a FIFO topic needs a group", outflow.Row{Queue: "fan.fifo", Payload: []byte("x")}, outflow.ErrGroupRequired},
		{"a FIFO topic with a group", outflow.Row{Queue: "fan.fifo", Payload: []byte("x"), Group: "g"}, nil},
		{"a bus needs a JSON object", outflow.Row{Queue: "domain", Payload: []byte("hello")}, outflow.ErrNotJSON},
		{"a bus refuses an outflow member", outflow.Row{Queue: "domain", Payload: []byte(`{"outflow":{}}`)}, outflow.ErrNotJSON},
		{"a bus takes an object", outflow.Row{Queue: "domain", Payload: []byte(`{"id":1}`)}, nil},
		{"a bus with no options needs the attributes", outflow.Row{Queue: "bare", Payload: []byte(`{}`)}, outflow.ErrEventField},
		{"a bus with the attributes", outflow.Row{Queue: "bare", Payload: []byte(`{}`),
			Attributes: map[string]string{"source": "app", "detail-type": "T"}}, nil},
		{"a bus keeps to 256 KiB", outflow.Row{Queue: "domain", Payload: []byte(`{"p":"` + string(big) + `"}`)}, outflow.ErrPayloadTooLarge},
		{"a trace context that is not one", outflow.Row{Queue: "orders", Payload: []byte("x"), TraceParent: "nope"}, outflow.ErrAttributeValue},
		{"two trace contexts that differ", outflow.Row{Queue: "orders", Payload: []byte("x"), TraceParent: testTraceParent,
			Attributes: map[string]string{"traceparent": "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00"}}, outflow.ErrAttributeValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := p.Put(context.Background(), tt.row)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestNewProducer_RefusesRoutesThatDoNotRead(t *testing.T) {
	t.Parallel()
	_, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: "t", Routes: "orders=not a target"})
	require.ErrorContains(t, err, `route "orders"`)
}

func TestPut_FillsTheTraceParentFromTheContext(t *testing.T) {
	t.Parallel()
	span := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x57, 0x59, 0xe9, 0x88, 0xbd, 0x86, 0x2e, 0x3f, 0xe1, 0xbe, 0x46, 0xa9, 0x94, 0x27, 0x27, 0x93},
		SpanID:  trace.SpanID{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8}, TraceFlags: trace.FlagsSampled,
	})
	otel := trace.ContextWithSpanContext(context.Background(), span)
	//lint:ignore SA1029 aws-lambda-go keys the trace header with this plain string
	lambda := context.WithValue(context.Background(), "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	eight := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		eight[k] = "v"
	}
	tests := []struct {
		name string
		ctx  context.Context
		row  outflow.Row
		want string
	}{
		{"from an OpenTelemetry span", otel, outflow.Row{}, testTraceParent},
		{"from Lambda's X-Ray header", lambda, outflow.Row{}, testTraceParent},
		{"none in the context", context.Background(), outflow.Row{}, ""},
		{"the row's own wins", otel, outflow.Row{TraceParent: "00-11111111111111111111111111111111-2222222222222222-00"}, "00-11111111111111111111111111111111-2222222222222222-00"},
		{"no room among eight attributes", otel, outflow.Row{Attributes: eight}, ""},
	}
	p, store := newRoutedProducer(t, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			row := tt.row
			row.Queue, row.Payload = "orders", []byte("x")
			keys, err := p.Put(tt.ctx, row)
			require.NoError(t, err)
			got, err := store.Get(context.Background(), keys[0])
			require.NoError(t, err)
			require.Equal(t, tt.want, got.Attributes["traceparent"])
		})
	}
	require.Equal(t, testTraceParent, outflow.TraceParent(otel))
}

// A producer that retries a Put from another request carries another
// trace context; the row is the same row.
func TestPut_IsIdempotentAcrossTraceContexts(t *testing.T) {
	t.Parallel()
	p, store := newRoutedProducer(t, 0)
	row := outflow.Row{Key: "k-trace", Queue: "orders", Payload: []byte("x")}
	first, second := row, row
	first.TraceParent = testTraceParent
	second.TraceParent = "00-11111111111111111111111111111111-2222222222222222-01"
	_, err := p.Put(context.Background(), first)
	require.NoError(t, err)
	_, err = p.Put(context.Background(), second)
	require.NoError(t, err)
	got, err := store.Get(context.Background(), "k-trace")
	require.NoError(t, err)
	require.Equal(t, testTraceParent, got.Attributes["traceparent"], "the first staging stands")

	changed := second
	changed.Payload = []byte("y")
	_, err = p.Put(context.Background(), changed)
	require.ErrorIs(t, err, outflow.ErrKeyConflict)
}
