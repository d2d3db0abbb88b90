package consume

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoClosedHook is the reason a Handler or a Poller with no Closed hook
// gives for a message that closes a place: it is reported failed, logged
// at ERROR and counted (ClosingMessagesWithoutHook), never acknowledged
// unread. Before 1.0.0 it was acknowledged unread, and a consumer wired to
// the first documented recipe (an Inbox used inside Apply, no Closed)
// left its group's cursor behind the place for ever, in silence. Set
// Closed to the Inbox's Close, or to AckClosed where the consumer keeps no
// order.
var ErrNoClosedHook = errors.New("a message that closes a place reached a consumer with no Closed hook: " +
	"set Closed to your Inbox's Close, or to consume.AckClosed if this consumer keeps no order")

// AckClosed acknowledges a message that closes a place unread: the Closed
// hook of a consumer that keeps no order (no Inbox, or one under GapPass
// that never waits for a place). It says so in the code, where a nil
// hook said nothing.
func AckClosed(context.Context, Message) error { return nil }

// applyMessage gives m to apply, or a message that closes a place to
// closed (an error wrapping ErrNoClosedHook when closed is nil), and
// reports whether the message is done: nil for applied, a duplicate, or
// recorded late. Handler and Poller share it, so both acknowledge the
// same outcomes.
func applyMessage(ctx context.Context, m Message, apply, closed func(context.Context, Message) error) error {
	var err error
	switch {
	case m.Closed == "":
		err = apply(ctx, m)
	case closed != nil:
		err = closed(ctx, m)
	default:
		err = fmt.Errorf("message %s, place %d of group %q, closed (%s): %w", m.Key, m.Seq, m.Group, m.Closed, ErrNoClosedHook)
	}
	if errors.Is(err, ErrDuplicate) || errors.Is(err, ErrLate) {
		return nil
	}
	return err
}
