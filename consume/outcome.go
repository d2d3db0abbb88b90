package consume

import (
	"context"
	"errors"
)

// applyMessage gives m to apply, or a message that closes a place to
// closed (acknowledged unread when closed is nil), and reports whether
// the message is done: nil for applied, a duplicate, or recorded late.
// Handler and Poller share it, so both acknowledge the same outcomes.
func applyMessage(ctx context.Context, m Message, apply, closed func(context.Context, Message) error) error {
	var err error
	switch {
	case m.Closed == "":
		err = apply(ctx, m)
	case closed != nil:
		err = closed(ctx, m)
	}
	if errors.Is(err, ErrDuplicate) || errors.Is(err, ErrLate) {
		return nil
	}
	return err
}
