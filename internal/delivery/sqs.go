package delivery

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// SQSAPI is the part of the SQS client the deliverer uses.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// sqsTraceHeader is the system attribute X-Ray reads a message's trace from.
const sqsTraceHeader = "AWSTraceHeader"

// toSQS sends rows to a queue with SendMessageBatch.
func toSQS(ctx context.Context, api SQSAPI, t Target, rows []outbox.Row, maxBytes int, errs []error) {
	limit, whose := target.SizeLimit(t, maxBytes)
	parts := messageParts(rows, t.FIFO, limit, whose, errs, sqsEntry)
	inBatches(ctx, rows, parts, limit, errs, func(batch []part[types.SendMessageBatchRequestEntry]) {
		out, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(t.Address), Entries: entries(batch)})
		if err != nil {
			// AWS.SimpleQueueService.NonExistentQueue, QueueDoesNotExist
			// in the SDK: a definite refusal.
			failBatch(errs, batch, "send batch", noDestination[*types.QueueDoesNotExist](err))
			return
		}
		got := answers{}
		for _, ok := range out.Successful {
			got[aws.ToString(ok.Id)] = nil
		}
		for _, f := range out.Failed {
			got[aws.ToString(f.Id)] = refused("sqs", f.Code, f.Message, f.SenderFault)
		}
		got.unsureAfterRetry(out.ResultMetadata)
		applyAnswers(errs, batch, got, "sqs")
	})
}

// sqsEntry is a message as a SendMessageBatch entry. A row with a valid
// traceparent also carries it as AWSTraceHeader, in X-Ray's form.
func sqsEntry(id string, m target.Message, row outbox.Row) types.SendMessageBatchRequestEntry {
	attrs := make(map[string]types.MessageAttributeValue, len(m.Attrs))
	for k, v := range m.Attrs {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String(target.AttrType(k)), StringValue: aws.String(v)}
	}
	e := types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(m.Body), MessageAttributes: attrs}
	if h, ok := target.XRayHeader(row.Attributes[target.AttrTraceParent]); ok {
		e.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{
			sqsTraceHeader: {DataType: aws.String("String"), StringValue: aws.String(h)},
		}
	}
	if m.Group != "" {
		e.MessageGroupId, e.MessageDeduplicationId = aws.String(m.Group), aws.String(m.Dedup)
	}
	return e
}

// refused is the error for an entry SQS or SNS refused: permanent when
// the fault is the sender's and lies in the message itself, transient
// otherwise. Both mark a throttle and a refusal for the queue's or topic's
// key or for IAM as the sender's fault too (they are 4xx errors), but the
// same message goes through once the throttle passes or the key or policy
// is fixed. Either way the service answered for the entry: it was not
// stored (outbox.Refused).
func refused(service string, code, message *string, senderFault bool) error {
	c := aws.ToString(code)
	err := fmt.Errorf("%s refused message: %s: %s", service, c, aws.ToString(message))
	if senderFault && !retryableCode(c) {
		return outbox.Permanent(err)
	}
	return outbox.Refused(err)
}

// retryableCode reports whether an entry's error code names a throttle, a
// KMS failure (SQS's KMS.*, SNS's KMS*) or an authorization failure.
func retryableCode(code string) bool {
	switch code {
	case "AuthorizationError", "AccessDenied", "AccessDeniedException", "RequestThrottled", "Throttled":
		return true
	}
	// SQS's codes have been spelt KMS.AccessDeniedException and
	// KmsAccessDenied; SNS's KMSAccessDenied.
	return strings.HasPrefix(strings.ToLower(code), "kms") || strings.Contains(code, "Throttl")
}
