package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// countingEvents counts the PutEvents calls that pass to next, and keeps
// the last request.
type countingEvents struct {
	next  delivery.EventBridgeAPI
	calls atomic.Int64
	last  atomic.Pointer[eventbridge.PutEventsInput]
}

func (c *countingEvents) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	c.calls.Add(1)
	c.last.Store(in)
	return c.next.PutEvents(ctx, in, opts...)
}

// answerEvents answers PutEvents with answer.
type answerEvents func(*eventbridge.PutEventsInput) (*eventbridge.PutEventsOutput, error)

func (a answerEvents) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	return a(in)
}

// delivered is an event as a rule's SQS target receives it.
type delivered struct {
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
	Detail     struct {
		Outflow struct {
			Key         string            `json:"key"`
			Attempt     int               `json:"attempt"`
			TraceParent string            `json:"traceparent"`
			Attributes  map[string]string `json:"attributes"`
		} `json:"outflow"`
		Order int    `json:"order"`
		Pad   string `json:"pad"`
	} `json:"detail"`
}

// events are n rows whose payloads are JSON objects padded to about size.
func events(n, size int) []outbox.Row {
	out := make([]outbox.Row, n)
	for i := range out {
		out[i] = outbox.Row{Key: "e" + strconv.Itoa(i), Attempt: 1,
			Payload: []byte(`{"order":` + strconv.Itoa(i) + `,"pad":"` + strings.Repeat("x", size) + `"}`)}
	}
	return out
}

func TestDeliver_ToEventBridge_ArrivesThroughARuleWithTheKeyInTheDetail(t *testing.T) {
	t.Parallel()
	bus, busARN := awstest.NewBus(t)
	sub := awstest.RouteEvents(t, bus, "app.orders", "app.billing")
	api := &countingEvents{next: awstest.EventBridge(t)}
	d := router(t, delivery.Clients{EventBridge: api}, delivery.Routes{
		"domain":  busARN + "?source=app.orders&detail-type=OrderPlaced",
		"by-name": bus + "?source=app.orders",
	})

	// Phase 1: 23 events by the bus's ARN, in three requests; the route's
	// options give source and detail-type, a row's attributes override.
	rows := events(23, 10)
	rows[0].Attributes = map[string]string{delivery.AttrTraceParent: traceParent, "tenant": "t1"}
	rows[1].Attributes = map[string]string{delivery.AttrSource: "app.billing", delivery.AttrDetailType: "Invoiced"}
	for _, err := range d.Deliver(context.Background(), "domain", rows) {
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, api.calls.Load())

	got := receiveEvents(t, sub, len(rows))
	require.Len(t, got, len(rows), "every event arrived once")
	first := got["e0"]
	require.Equal(t, "app.orders", first.Source)
	require.Equal(t, "OrderPlaced", first.DetailType)
	require.Equal(t, 0, first.Detail.Order, "the payload's members are the detail's")
	require.Equal(t, 1, first.Detail.Outflow.Attempt)
	require.Equal(t, traceParent, first.Detail.Outflow.TraceParent)
	require.Equal(t, map[string]string{"tenant": "t1"}, first.Detail.Outflow.Attributes)
	require.Equal(t, "app.billing", got["e1"].Source)
	require.Equal(t, "Invoiced", got["e1"].DetailType)
	require.Empty(t, got["e1"].Detail.Outflow.Attributes, "source and detail-type are not repeated")

	// Phase 2: 100 KiB events by the bus's name, two a request (256 KiB).
	api.calls.Store(0)
	big := events(5, 100*1024)
	for i := range big {
		big[i].Attributes = map[string]string{delivery.AttrSource: "app.orders", delivery.AttrDetailType: "Big"}
	}
	for _, err := range d.Deliver(context.Background(), "by-name", big) {
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, api.calls.Load())
	require.Len(t, receiveEvents(t, sub, len(big)), len(big))
}

func TestDeliver_ToEventBridge_CarriesTheTraceAsXRaysTraceHeader(t *testing.T) {
	t.Parallel()
	api := &countingEvents{next: answerEvents(func(in *eventbridge.PutEventsInput) (*eventbridge.PutEventsOutput, error) {
		return &eventbridge.PutEventsOutput{Entries: make([]types.PutEventsResultEntry, len(in.Entries))}, nil
	})}
	d := router(t, delivery.Clients{EventBridge: api}, delivery.Routes{"domain": "bus?source=s&detail-type=d"})
	row := events(1, 1)[0]
	row.Attributes = map[string]string{delivery.AttrTraceParent: traceParent}
	require.NoError(t, d.Deliver(context.Background(), "domain", []outbox.Row{row})[0])
	e := api.last.Load().Entries[0]
	require.Equal(t, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", aws.ToString(e.TraceHeader))
	require.Equal(t, "bus", aws.ToString(e.EventBusName))
}

func TestDeliver_ToEventBridge_DeadLettersPayloadsThatAreNotJSONObjects(t *testing.T) {
	t.Parallel()
	bus, _ := awstest.NewBus(t)
	sub := awstest.RouteEvents(t, bus, "app")
	d := router(t, delivery.Clients{EventBridge: awstest.EventBridge(t)}, delivery.Routes{"domain": bus + "?source=app&detail-type=T"})
	tests := []struct {
		name    string
		payload string
		attrs   map[string]string
		want    error
	}{
		{"text", "hello", nil, delivery.ErrNotJSON},
		{"array", `[1,2]`, nil, delivery.ErrNotJSON},
		{"string", `"s"`, nil, delivery.ErrNotJSON},
		{"cut short", `{"a":`, nil, delivery.ErrNotJSON},
		{"binary", "\xff{}", nil, delivery.ErrNotJSON},
		{"empty", "", nil, delivery.ErrNotJSON},
		{"an outflow member", `{"outflow":1}`, nil, delivery.ErrNotJSON},
		{"an aws. source", `{}`, map[string]string{delivery.AttrSource: "aws.s3"}, delivery.ErrEventField},
		// EventBridge's documented limit for an entry is 256 KB, 262,144
		// bytes: a detail of that many bytes is over it. Written out, not
		// MaxEventBytes: a wrong constant would move the input with it.
		{"too large", `{"p":"` + strings.Repeat("x", 262_144) + `"}`, nil, delivery.ErrTooLarge},
	}
	bad := make([]outbox.Row, len(tests))
	for i, tt := range tests {
		bad[i] = outbox.Row{Key: "bad" + strconv.Itoa(i), Payload: []byte(tt.payload), Attributes: tt.attrs, Attempt: 1}
	}
	good := []outbox.Row{
		{Key: "empty-object", Payload: []byte(` {} `), Attempt: 1},
		{Key: "nested", Payload: []byte(`{"a":{"outflow":[1]},"b":[{}]}`), Attempt: 1},
	}
	errs := d.Deliver(context.Background(), "domain", append(bad, good...))
	for i, tt := range tests {
		require.ErrorIs(t, errs[i], tt.want, tt.name)
		require.True(t, outbox.IsPermanent(errs[i]), tt.name)
	}
	for _, err := range errs[len(bad):] {
		require.NoError(t, err, "one bad row does not hold up the others")
	}
	got := receiveEvents(t, sub, len(good))
	require.Len(t, got, len(good))
	require.Contains(t, got, "empty-object")
	require.Contains(t, got, "nested")
}

func TestDeliver_ToEventBridge_NeedsASourceAndADetailType(t *testing.T) {
	t.Parallel()
	d := router(t, delivery.Clients{EventBridge: answerEvents(nil)}, delivery.Routes{"bare": "arn:aws:events:us-east-1:123456789012:event-bus/bus", "half": "bus?source=app"})
	for queue, want := range map[string]string{"bare": "no source", "half": "no detail-type"} {
		err := d.Deliver(context.Background(), queue, events(1, 1))[0]
		require.ErrorIs(t, err, delivery.ErrEventField)
		require.ErrorContains(t, err, want)
		require.True(t, outbox.IsPermanent(err))
	}
}

func TestDeliver_ToEventBridge_ClassifiesEachEntrysErrorCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		api           delivery.EventBridgeAPI
		wantErr       []string
		wantPermanent []bool
	}{
		{
			name: "per entry",
			api: answerEvents(func(in *eventbridge.PutEventsInput) (*eventbridge.PutEventsOutput, error) {
				return &eventbridge.PutEventsOutput{FailedEntryCount: 3, Entries: []types.PutEventsResultEntry{
					{EventId: aws.String("id0")},
					{ErrorCode: aws.String("MalformedDetail"), ErrorMessage: aws.String("Detail is malformed.")},
					{ErrorCode: aws.String("ThrottlingException"), ErrorMessage: aws.String("slow down")},
					{ErrorCode: aws.String("InternalFailure"), ErrorMessage: aws.String("oops")},
				}}, nil // entry 4 gets no answer
			}),
			wantErr:       []string{"", "MalformedDetail", "ThrottlingException", "InternalFailure", "eventbridge returned no result"},
			wantPermanent: []bool{false, true, false, false, false},
		},
		{
			name: "whole request",
			api: answerEvents(func(*eventbridge.PutEventsInput) (*eventbridge.PutEventsOutput, error) {
				return nil, errors.New("AccessDeniedException")
			}),
			wantErr:       []string{"AccessDenied", "AccessDenied", "AccessDenied", "AccessDenied", "AccessDenied"},
			wantPermanent: []bool{false, false, false, false, false},
		},
		{
			name:          "a bus that does not exist",
			api:           awstest.EventBridge(t),
			wantErr:       []string{"ResourceNotFound", "ResourceNotFound", "ResourceNotFound", "ResourceNotFound", "ResourceNotFound"},
			wantPermanent: []bool{false, false, false, false, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := router(t, delivery.Clients{EventBridge: tt.api}, delivery.Routes{"domain": "outflow-missing-bus?source=s&detail-type=d"})
			errs := d.Deliver(context.Background(), "domain", events(5, 1))
			for i, err := range errs {
				if tt.wantErr[i] == "" {
					require.NoError(t, err)
					continue
				}
				require.ErrorContains(t, err, tt.wantErr[i])
				require.Equal(t, tt.wantPermanent[i], outbox.IsPermanent(err), "entry %d", i)
			}
		})
	}
}

// receiveEvents reads want events from a rule's queue, by key.
func receiveEvents(t *testing.T, url string, want int) map[string]delivered {
	t.Helper()
	got := map[string]delivered{}
	for _, m := range awstest.Receive(t, url, want, 20*time.Second) {
		var e delivered
		require.NoError(t, json.Unmarshal([]byte(aws.ToString(m.Body)), &e))
		got[e.Detail.Outflow.Key] = e
	}
	return got
}
