package delivery

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// SNSAPI is the part of the SNS client the deliverer uses.
type SNSAPI interface {
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

// toSNS publishes rows to a topic with PublishBatch: the same message,
// attributes, group and deduplication id as SQS gets, so an SQS queue
// subscribed with raw message delivery receives what a queue route sends.
func toSNS(ctx context.Context, api SNSAPI, t Target, rows []outbox.Row, maxBytes int, errs []error) {
	limit, whose := target.SizeLimit(t, maxBytes)
	parts := messageParts(rows, t.FIFO, limit, whose, errs, snsEntry)
	inBatches(ctx, rows, parts, limit, errs, func(batch []part[types.PublishBatchRequestEntry]) {
		out, err := api.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(t.Address), PublishBatchRequestEntries: entries(batch)})
		if err != nil {
			// NotFound, a topic that does not exist: a definite refusal.
			failBatch(errs, batch, "publish batch", noDestination[*types.NotFoundException](err))
			return
		}
		got := answers{}
		for _, ok := range out.Successful {
			got[aws.ToString(ok.Id)] = nil
		}
		for _, f := range out.Failed {
			got[aws.ToString(f.Id)] = refused("sns", f.Code, f.Message, f.SenderFault)
		}
		got.unsureAfterRetry(out.ResultMetadata)
		applyAnswers(errs, batch, got, "sns")
	})
}

// snsEntry is a message as a PublishBatch entry.
func snsEntry(id string, m target.Message, _ outbox.Row) types.PublishBatchRequestEntry {
	attrs := make(map[string]types.MessageAttributeValue, len(m.Attrs))
	for k, v := range m.Attrs {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String(target.AttrType(k)), StringValue: aws.String(v)}
	}
	e := types.PublishBatchRequestEntry{Id: aws.String(id), Message: aws.String(m.Body), MessageAttributes: attrs}
	if m.Group != "" {
		e.MessageGroupId, e.MessageDeduplicationId = aws.String(m.Group), aws.String(m.Dedup)
	}
	return e
}
