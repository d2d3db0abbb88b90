package delivery_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// TestDeliver_ToEventBridge_RetriesEntriesDeniedByIAM: PutEvents answers
// NotAuthorizedForSourceException and NotAuthorizedForDetailTypeException
// when the caller's IAM policy does not allow the event's source or
// detail-type on the bus (the events:source and events:detail-type
// condition keys): access denials, fixed in IAM like AccessDeniedException,
// which the deliverer already retries. docs/targets.md dead-letters at
// once only "MalformedDetail or InvalidArgument" and retries "an access
// denial fixed in IAM"; the deliverer dead-letters these two at the first
// attempt, so a policy tightened by mistake turns every event of the
// route into a dead letter instead of a backlog that drains once fixed.
func TestDeliver_ToEventBridge_RetriesEntriesDeniedByIAM(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code          string
		wantPermanent bool
	}{
		{"NotAuthorizedForSourceException", false},
		{"NotAuthorizedForDetailTypeException", false},
		{"AccessDeniedException", false},
		{"MalformedDetail", true},
		{"InvalidArgument", true},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			api := answerEvents(func(in *eventbridge.PutEventsInput) (*eventbridge.PutEventsOutput, error) {
				return &eventbridge.PutEventsOutput{FailedEntryCount: 1, Entries: []types.PutEventsResultEntry{
					{EventId: aws.String("id0")},
					{ErrorCode: aws.String(tt.code), ErrorMessage: aws.String("refused")},
				}}, nil
			})
			d := router(t, delivery.Clients{EventBridge: api}, delivery.Routes{"domain": "domain-bus?source=app.orders&detail-type=OrderPlaced"})
			errs := d.Deliver(context.Background(), "domain", events(2, 1))
			require.NoError(t, errs[0])
			require.ErrorContains(t, errs[1], tt.code)
			require.Equal(t, tt.wantPermanent, outbox.IsPermanent(errs[1]), "%s: permanent only for what retrying cannot fix", tt.code)
		})
	}
}
