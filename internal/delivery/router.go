package delivery

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Clients are the AWS clients a Router sends with. A client may be nil
// when no route needs it.
type Clients struct {
	SQS         SQSAPI
	SNS         SNSAPI
	EventBridge EventBridgeAPI
}

// Router delivers each route's rows to its target: SendMessageBatch to an
// SQS queue, PublishBatch to an SNS topic, PutEvents to an EventBridge
// bus. It implements outbox.Deliverer.
type Router struct {
	clients  Clients
	targets  map[string]Target
	maxBytes int
}

var _ outbox.Deliverer = (*Router)(nil)

// New returns a deliverer over routes. maxBytes caps one message and one
// batch to SQS (0 means MaxMessageBytes); SNS and EventBridge keep to
// their own 256 KiB too. It fails when a target does not read or a route
// needs a client that c lacks.
func New(c Clients, routes Routes, maxBytes int) (*Router, error) {
	targets, err := routes.Targets()
	if err != nil {
		return nil, err
	}
	for name, t := range targets {
		if missing := (t.Kind == KindSQS && c.SQS == nil) || (t.Kind == KindSNS && c.SNS == nil) ||
			(t.Kind == KindEventBridge && c.EventBridge == nil); missing {
			return nil, fmt.Errorf("route %q: no %s client", name, t.Kind)
		}
	}
	return &Router{clients: c, targets: targets, maxBytes: maxBytes}, nil
}

// Deliver implements outbox.Deliverer. Rows that cannot be sent as they are
// (too large, too many attributes, no FIFO group, not JSON for
// EventBridge, or refused as the sender's fault) get a permanent error; a
// failed request or a failure on the service's side a transient one. A
// row whose queue has no route gets outbox.Unrouted: retried, since the
// route missing is more often this dispatcher's mistake than the row's,
// and dead-lettered when its budget is spent.
func (r *Router) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	t, ok := r.targets[queue]
	if !ok {
		for i := range errs {
			errs[i] = outbox.Unrouted(queue)
		}
		return errs
	}
	switch t.Kind {
	case KindSNS:
		toSNS(ctx, r.clients.SNS, t, rows, r.maxBytes, errs)
	case KindEventBridge:
		toEventBridge(ctx, r.clients.EventBridge, t, rows, errs)
	default:
		toSQS(ctx, r.clients.SQS, t, rows, r.maxBytes, errs)
	}
	return errs
}

// ClientsFromConfig makes the SQS, SNS and EventBridge clients from one
// AWS config.
func ClientsFromConfig(cfg aws.Config) Clients {
	return Clients{SQS: sqs.NewFromConfig(cfg), SNS: sns.NewFromConfig(cfg), EventBridge: eventbridge.NewFromConfig(cfg)}
}
