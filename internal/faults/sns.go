package faults

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/outflowhq/outflow/internal/delivery"
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
	if len(in.PublishBatchRequestEntries) > 0 {
		key, attempt := SNSSite(in.PublishBatchRequestEntries[0])
		if s.Plan.Hit(SendCall, key, attempt) {
			return nil, injected(SendCall)
		}
	}
	out := &sns.PublishBatchOutput{}
	pass := make([]types.PublishBatchRequestEntry, 0, len(in.PublishBatchRequestEntries))
	sites := make(map[string][2]string, len(in.PublishBatchRequestEntries)) // id -> key, attempt
	for _, e := range in.PublishBatchRequestEntries {
		key, attempt := SNSSite(e)
		switch {
		case s.Plan.Hit(SendEntry, key, attempt):
			out.Failed = append(out.Failed, snsRefused(e.Id, SendEntry, false))
		case s.Plan.Hit(SendSender, key, attempt):
			out.Failed = append(out.Failed, snsRefused(e.Id, SendSender, true))
		default:
			pass = append(pass, e)
			sites[aws.ToString(e.Id)] = [2]string{key, attempt}
		}
	}
	if len(pass) == 0 {
		return out, nil
	}
	next := *in
	next.PublishBatchRequestEntries = pass
	res, err := s.Next.PublishBatch(ctx, &next, opts...)
	if err != nil {
		return nil, err
	}
	out.Failed = append(out.Failed, res.Failed...)
	for _, ok := range res.Successful {
		site := sites[aws.ToString(ok.Id)]
		if s.Plan.Hit(SendAmbiguous, site[0], site[1]) {
			s.Plan.MarkDuplicateWindow(site[0])
			out.Failed = append(out.Failed, snsRefused(ok.Id, SendAmbiguous, false))
			continue
		}
		out.Successful = append(out.Successful, ok)
	}
	return out, nil
}

// SNSSite is the row key and attempt a PublishBatch entry carries.
func SNSSite(e types.PublishBatchRequestEntry) (key, attempt string) {
	return aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue), aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue)
}

func snsRefused(id *string, kind Kind, senderFault bool) types.BatchResultErrorEntry {
	code := "InternalError"
	if senderFault {
		code = "InvalidParameter"
	}
	return types.BatchResultErrorEntry{Id: id, Code: aws.String(code), Message: aws.String(injected(kind).Error()), SenderFault: senderFault}
}
