package faults

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/target"
)

// SQS wraps the SQS API under the deliverer with send faults. Faults strike
// on the wire, after the deliverer's own checks, as SQS's do: a row the
// deliverer refuses (no group on a FIFO queue, say) is never sent, so no
// injected fault can stand in for its real reason.
type SQS struct {
	Next delivery.SQSAPI
	Plan *Plan
}

var _ delivery.SQSAPI = SQS{}

// SendMessageBatch implements delivery.SQSAPI. Decisions hash the entry's key
// and attempt, which the deliverer puts in every message's attributes.
func (s SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	ok, failed, refusals, err := byID(s.Plan, in.Entries, entrySite,
		func(e types.SendMessageBatchRequestEntry) *string { return e.Id },
		func(r types.SendMessageBatchResultEntry) *string { return r.Id },
		func(pass []types.SendMessageBatchRequestEntry) ([]types.SendMessageBatchResultEntry, []types.BatchResultErrorEntry, error) {
			next := *in
			next.Entries = pass
			res, err := s.Next.SendMessageBatch(ctx, &next, opts...)
			if err != nil {
				return nil, nil, err
			}
			return res.Successful, res.Failed, nil
		})
	if err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{Successful: ok, Failed: failed}
	for _, r := range refusals {
		out.Failed = append(out.Failed, refused(r.id, r.kind, r.sender))
	}
	return out, nil
}

// entrySite is the row key and attempt a message carries.
func entrySite(e types.SendMessageBatchRequestEntry) (key, attempt string) {
	return aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue), closingSite(aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue), e.MessageAttributes[target.AttrClosed].StringValue)
}

func refused(id *string, kind Kind, senderFault bool) types.BatchResultErrorEntry {
	code := "InternalError"
	if senderFault {
		code = "InvalidParameterValue"
	}
	return types.BatchResultErrorEntry{Id: id, Code: aws.String(code), Message: aws.String(injected(kind).Error()), SenderFault: senderFault}
}
