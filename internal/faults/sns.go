package faults

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/target"
)

// SNS wraps the SNS API under the deliverer with the same send faults as
// SQS, on PublishBatch: the whole call fails, an entry fails (transient,
// or as the sender's fault), or an entry is published but reported failed.
type SNS struct {
	Next delivery.SNSAPI
	Plan *Plan
}

var _ delivery.SNSAPI = SNS{}

// PublishBatch implements delivery.SNSAPI. Decisions hash the entry's key
// and attempt, which the deliverer puts in every message's attributes.
func (s SNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	ok, failed, refusals, err := byID(s.Plan, in.PublishBatchRequestEntries, SNSSite,
		func(e types.PublishBatchRequestEntry) *string { return e.Id },
		func(r types.PublishBatchResultEntry) *string { return r.Id },
		func(pass []types.PublishBatchRequestEntry) ([]types.PublishBatchResultEntry, []types.BatchResultErrorEntry, error) {
			next := *in
			next.PublishBatchRequestEntries = pass
			res, err := s.Next.PublishBatch(ctx, &next, opts...)
			if err != nil {
				return nil, nil, err
			}
			return res.Successful, res.Failed, nil
		})
	if err != nil {
		return nil, err
	}
	out := &sns.PublishBatchOutput{Successful: ok, Failed: failed}
	for _, r := range refusals {
		out.Failed = append(out.Failed, snsRefused(r.id, r.kind, r.sender))
	}
	return out, nil
}

// SNSSite is the row key and attempt a PublishBatch entry carries.
func SNSSite(e types.PublishBatchRequestEntry) (key, attempt string) {
	return aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue), closingSite(aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue), e.MessageAttributes[target.AttrClosed].StringValue)
}

func snsRefused(id *string, kind Kind, senderFault bool) types.BatchResultErrorEntry {
	code := "InternalError"
	if senderFault {
		code = "InvalidParameter"
	}
	return types.BatchResultErrorEntry{Id: id, Code: aws.String(code), Message: aws.String(injected(kind).Error()), SenderFault: senderFault}
}
