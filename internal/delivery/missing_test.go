package delivery_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// TestDeliver_CallsASendToADestinationThatDoesNotExistADefiniteRefusal:
// a queue, topic or bus that does not exist refuses the whole request
// (SQS's AWS.SimpleQueueService.NonExistentQueue, SNS's NotFound,
// EventBridge's ResourceNotFoundException): nothing was stored, and
// nothing can land later, so the failure is definite (the history and the
// console show no "outcome unknown", and an ordered group under skip need
// not wait behind it). It stays retried, not permanent: the destination
// may yet be created.
func TestDeliver_CallsASendToADestinationThatDoesNotExistADefiniteRefusal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		clients func(t *testing.T) delivery.Clients
		address string
		rows    []outbox.Row
		wantErr string
	}{
		{"an sqs queue", func(t *testing.T) delivery.Clients { return delivery.Clients{SQS: awstest.SQS(t)} },
			awstest.Endpoint() + "/000000000000/outflow-missing-queue", rows(3, 10), "NonExistentQueue"},
		{"an sns topic", func(t *testing.T) delivery.Clients { return delivery.Clients{SNS: awstest.SNS(t)} },
			"arn:aws:sns:us-east-1:123456789012:outflow-missing", rows(3, 10), "NotFound"},
		{"an eventbridge bus", func(t *testing.T) delivery.Clients { return delivery.Clients{EventBridge: awstest.EventBridge(t)} },
			"outflow-missing-bus?source=s&detail-type=d", events(3, 10), "ResourceNotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := router(t, tt.clients(t), delivery.Routes{"r": tt.address})
			errs := d.Deliver(context.Background(), "r", tt.rows)
			require.Len(t, errs, len(tt.rows))
			for i, err := range errs {
				require.ErrorContains(t, err, tt.wantErr, "row %d", i)
				require.True(t, outbox.Definite(err), "row %d: nothing was stored: %v", i, err)
				require.False(t, outbox.IsPermanent(err), "row %d: retried, the destination may yet be created", i)
			}
		})
	}
}
