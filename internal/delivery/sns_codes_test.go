package delivery_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// TestDeliver_ToSNS_RetriesEntriesRefusedForThrottlingOrTheKey: SNS's KMS
// and throttling errors are client (4xx) errors, so a PublishBatch entry
// refused for them is reported with SenderFault set. They are not faults
// of the message: a throttle passes, a key re-enabled or a key policy or
// IAM statement fixed lets the same message through. docs/targets.md
// retries "a failed or throttled request ... an access denial fixed in
// IAM", and "Customer managed key" promises a send refused for the key is
// retried; the deliverer dead-letters every SenderFault entry at once.
// Only the message's own faults (InvalidParameter, too long) are
// permanent.
func TestDeliver_ToSNS_RetriesEntriesRefusedForThrottlingOrTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code          string
		wantPermanent bool
	}{
		{"KMSThrottling", false},
		{"KMSAccessDenied", false},
		{"KMSDisabled", false},
		{"KMSInvalidState", false},
		{"Throttled", false},
		{"AuthorizationError", false},
		{"InvalidParameter", true},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			api := answerSNS(func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
				e := in.PublishBatchRequestEntries
				return &sns.PublishBatchOutput{
					Successful: []types.PublishBatchResultEntry{{Id: e[0].Id}},
					Failed:     []types.BatchResultErrorEntry{{Id: e[1].Id, Code: aws.String(tt.code), Message: aws.String("refused"), SenderFault: true}},
				}, nil
			})
			d := router(t, delivery.Clients{SNS: api}, delivery.Routes{"notices": "arn:aws:sns:us-east-1:123456789012:notices"})
			errs := d.Deliver(context.Background(), "notices", rows(2, 10))
			require.NoError(t, errs[0])
			require.ErrorContains(t, errs[1], tt.code)
			require.Equal(t, tt.wantPermanent, outbox.IsPermanent(errs[1]), "%s: permanent only for what retrying cannot fix", tt.code)
		})
	}
}
