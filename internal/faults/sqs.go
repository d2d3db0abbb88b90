package faults

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/delivery"
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
	if len(in.Entries) > 0 {
		key, attempt := entrySite(in.Entries[0])
		if s.Plan.Hit(SendCall, key, attempt) {
			return nil, injected(SendCall)
		}
	}
	out := &sqs.SendMessageBatchOutput{}
	pass := make([]types.SendMessageBatchRequestEntry, 0, len(in.Entries))
	sites := make(map[string][2]string, len(in.Entries)) // id -> key, attempt
	for _, e := range in.Entries {
		key, attempt := entrySite(e)
		switch {
		case s.Plan.Hit(SendEntry, key, attempt):
			out.Failed = append(out.Failed, refused(e.Id, SendEntry, false))
		case s.Plan.Hit(SendSender, key, attempt):
			out.Failed = append(out.Failed, refused(e.Id, SendSender, true))
		default:
			pass = append(pass, e)
			sites[aws.ToString(e.Id)] = [2]string{key, attempt}
		}
	}
	if len(pass) == 0 {
		return out, nil
	}
	next := *in
	next.Entries = pass
	res, err := s.Next.SendMessageBatch(ctx, &next, opts...)
	if err != nil {
		return nil, err
	}
	out.Failed = append(out.Failed, res.Failed...)
	for _, ok := range res.Successful {
		site := sites[aws.ToString(ok.Id)]
		if s.Plan.Hit(SendAmbiguous, site[0], site[1]) {
			s.Plan.MarkDuplicateWindow(site[0])
			out.Failed = append(out.Failed, refused(ok.Id, SendAmbiguous, false))
			continue
		}
		out.Successful = append(out.Successful, ok)
	}
	return out, nil
}

// entrySite is the row key and attempt a message carries.
func entrySite(e types.SendMessageBatchRequestEntry) (key, attempt string) {
	return aws.ToString(e.MessageAttributes[delivery.AttrKey].StringValue), aws.ToString(e.MessageAttributes[delivery.AttrAttempt].StringValue)
}

func refused(id *string, kind Kind, senderFault bool) types.BatchResultErrorEntry {
	code := "InternalError"
	if senderFault {
		code = "InvalidParameterValue"
	}
	return types.BatchResultErrorEntry{Id: id, Code: aws.String(code), Message: aws.String(injected(kind).Error()), SenderFault: senderFault}
}
