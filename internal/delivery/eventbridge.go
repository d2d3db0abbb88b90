package delivery

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// EventBridgeAPI is the part of the EventBridge client the deliverer uses.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// permanentEventCodes are the entry error codes that name a fault of the
// event itself, which a retry cannot fix. Every other code is retried:
// InternalFailure, ThrottlingException, and the IAM denials
// (AccessDeniedException, NotAuthorizedForSourceException and
// NotAuthorizedForDetailTypeException, an events:source or
// events:detail-type condition), which a fixed policy lets through.
var permanentEventCodes = map[string]bool{
	"MalformedDetail": true,
	"InvalidArgument": true,
}

// toEventBridge puts rows on a bus with PutEvents.
func toEventBridge(ctx context.Context, api EventBridgeAPI, t Target, rows []outbox.Row, errs []error) {
	var parts []part[types.PutEventsRequestEntry]
	for i, row := range rows {
		e, err := target.NewEvent(row, t)
		if err != nil {
			errs[i] = outbox.Permanent(err)
			continue
		}
		entry := types.PutEventsRequestEntry{
			EventBusName: aws.String(t.Address), Source: aws.String(e.Source),
			DetailType: aws.String(e.DetailType), Detail: aws.String(e.Detail),
		}
		if e.TraceHeader != "" {
			entry.TraceHeader = aws.String(e.TraceHeader)
		}
		parts = append(parts, part[types.PutEventsRequestEntry]{entry: entry, row: i, size: e.Size})
	}
	inBatches(ctx, rows, parts, target.MaxEventBytes, errs, func(batch []part[types.PutEventsRequestEntry]) {
		out, err := api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries(batch)})
		if err != nil {
			// A bus that does not exist: a definite refusal.
			failBatch(errs, batch, "put events", noDestination[*types.ResourceNotFoundException](err))
			return
		}
		// PutEvents answers entry by entry in the order asked, without ids.
		got := answers{}
		for i, r := range out.Entries {
			if i >= len(batch) {
				break
			}
			code := aws.ToString(r.ErrorCode)
			if code == "" {
				got[batch[i].id()] = nil
				continue
			}
			// The bus answered for the entry: it was not put (Refused).
			err := outbox.Refused(fmt.Errorf("eventbridge refused event: %s: %s", code, aws.ToString(r.ErrorMessage)))
			if permanentEventCodes[code] {
				err = outbox.Permanent(err)
			}
			got[batch[i].id()] = err
		}
		got.unsureAfterRetry(out.ResultMetadata)
		applyAnswers(errs, batch, got, "eventbridge")
	})
}
