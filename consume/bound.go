package consume

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Effect makes a message's effect as the items of the consumer's own
// transaction: the Inbox commits them together with its record of the
// message, so both happen or neither does. It may return no items (an
// effect that is only the record) and must not write them itself.
type Effect func(ctx context.Context, m Message) ([]types.TransactWriteItem, error)

// Handler returns a Lambda Handler wired to the inbox: each message's
// Effect is committed with Apply, and each message that closes a place
// goes to Close, so the wiring that decides correctness is not the
// consumer's to get wrong. Set its OnResult, OnFailure, Logger or Metrics
// as on any Handler.
func (in *Inbox) Handler(effect Effect) Handler {
	return Handler{Apply: in.applyEffect(effect), Closed: in.Close}
}

// Poller returns a Poller of the queue wired to the inbox as Handler
// wires one. Set its Concurrency, Visibility, Wait and hooks before Run.
func (in *Inbox) Poller(api PollAPI, queueURL string, effect Effect) *Poller {
	return &Poller{API: api, QueueURL: queueURL, Apply: in.applyEffect(effect), Closed: in.Close}
}

// applyEffect is an Apply that commits effect's items with the message's
// inbox items.
func (in *Inbox) applyEffect(effect Effect) func(context.Context, Message) error {
	return func(ctx context.Context, m Message) error {
		items, err := effect(ctx, m)
		if err != nil {
			return err
		}
		return in.Apply(ctx, m, items...)
	}
}
