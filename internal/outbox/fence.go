package outbox

import (
	"context"
	"errors"
)

// ErrLeaseEnding is the error a deliverer gives a row it did not send
// because MaySend refused it: a send call started now could end after the
// row's lease. The engine releases the row unsent.
var ErrLeaseEnding = errors.New("not sent: the claim's lease would end before a send call could")

// fenceKey is the context key of the engine's fence.
type fenceKey struct{}

// WithFence returns ctx carrying mayStart, the rule MaySend asks whether a
// send call carrying a row may start now. The engine puts its own on the
// context of every Deliver.
func WithFence(ctx context.Context, mayStart func(Row) bool) context.Context {
	return context.WithValue(ctx, fenceKey{}, mayStart)
}

// MaySend reports whether a deliverer may start a send call carrying row
// now: the call, bounded by the policy's CallTimeout, would end before the
// row's lease does. A deliverer that makes several calls for one Deliver
// asks before each, and gives a row it may not send ErrLeaseEnding. Called
// outside an engine's Deliver (ctx carries no fence), it reports true.
func MaySend(ctx context.Context, row Row) bool {
	mayStart, ok := ctx.Value(fenceKey{}).(func(Row) bool)
	return !ok || mayStart(row)
}
