package delivery_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// eventRowsPutEventsRefuses are rows PutEvents documents it refuses
// (PutEventsRequestEntry: DetailType 1-128, Source 1-256; PutEvents: JSON
// integers within int64, nesting up to 1000 levels), none of which Validate
// or the deliverer sees today.
func eventRowsPutEventsRefuses() []struct {
	name string
	row  outbox.Row
} {
	attrs := func(source, detailType string) map[string]string {
		return map[string]string{delivery.AttrSource: source, delivery.AttrDetailType: detailType}
	}
	deep := strings.Repeat(`{"a":`, 2000) + `1` + strings.Repeat(`}`, 2000)
	return []struct {
		name string
		row  outbox.Row
	}{
		{"a detail-type over 128 characters", outbox.Row{Key: "k1", Attempt: 1, Payload: []byte(`{"id":1}`),
			Attributes: attrs("app", strings.Repeat("T", 129))}},
		{"a source over 256 characters", outbox.Row{Key: "k2", Attempt: 1, Payload: []byte(`{"id":1}`),
			Attributes: attrs(strings.Repeat("s", 257), "T")}},
		{"an integer past int64", outbox.Row{Key: "k3", Attempt: 1, Payload: []byte(`{"id":9223372036854775808}`),
			Attributes: attrs("app", "T")}},
		{"JSON nested deeper than PutEvents reads", outbox.Row{Key: "k4", Attempt: 1, Payload: []byte(deep),
			Attributes: attrs("app", "T")}},
	}
}

func TestValidate_ToEventBridge_RefusesWhatPutEventsDocumentsItRefuses(t *testing.T) {
	t.Parallel()
	bus := delivery.Target{Kind: delivery.KindEventBridge, Address: "bus"}
	for _, tt := range eventRowsPutEventsRefuses() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Error(t, target.Validate(tt.row, bus, 0),
				"the producer stages a row the deliverer can only dead-letter after PutEvents refuses it")
		})
	}
}

// A row PutEvents refuses is dead-lettered before the request, so it can
// neither be retried as transient nor fail the request its neighbours ride in.
func TestDeliver_ToEventBridge_DeadLettersWhatPutEventsRefusesWithoutSendingIt(t *testing.T) {
	t.Parallel()
	for _, tt := range eventRowsPutEventsRefuses() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sent []types.PutEventsRequestEntry
			api := answerEvents(func(in *eventbridge.PutEventsInput) (*eventbridge.PutEventsOutput, error) {
				sent = append(sent, in.Entries...)
				out := &eventbridge.PutEventsOutput{}
				for range in.Entries {
					out.Entries = append(out.Entries, types.PutEventsResultEntry{EventId: aws.String("id")})
				}
				return out, nil
			})
			r, err := delivery.New(delivery.Clients{EventBridge: api}, delivery.Routes{"domain": "arn:aws:events:us-east-1:123456789012:event-bus/bus"}, 0)
			require.NoError(t, err)
			good := outbox.Row{Key: "good", Attempt: 1, Payload: []byte(`{"id":2}`),
				Attributes: map[string]string{delivery.AttrSource: "app", delivery.AttrDetailType: "T"}}
			errs := r.Deliver(context.Background(), "domain", []outbox.Row{tt.row, good})
			require.NoError(t, errs[1])
			require.Error(t, errs[0])
			require.True(t, outbox.IsPermanent(errs[0]), "got %v", errs[0])
			require.Len(t, sent, 1, "only the good row is sent")
		})
	}
}

// Route options PutEvents would refuse on every row make a route that can
// only dead-letter: ParseRoutes refuses them as it refuses an aws. source.
func TestParseRoutes_RefusesEventBridgeOptionsPutEventsRefuses(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"a detail-type over 128 characters": "b=bus?source=app&detail-type=" + strings.Repeat("T", 129),
		"a source over 256 characters":      "b=bus?source=" + strings.Repeat("s", 257) + "&detail-type=T",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := delivery.ParseRoutes(in)
			require.Error(t, err)
		})
	}
}

// A target that is no queue URL is refused, as a string with no scheme is.
func TestParseRoutes_RefusesURLsThatNameNoQueue(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"an endpoint with no queue":       "q=https://sqs.us-east-1.amazonaws.com",
		"an account with no queue":        "q=https://sqs.us-east-1.amazonaws.com/123456789012/",
		"a scheme SQS does not speak":     "q=ftp://sqs.us-east-1.amazonaws.com/123456789012/q",
		"a queue name SQS does not allow": "q=https://sqs.us-east-1.amazonaws.com/123456789012/my queue",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := delivery.ParseRoutes(in)
			require.Error(t, err)
		})
	}
}
