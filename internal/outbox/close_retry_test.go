package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// A closing message that fails for a while is retried with its own
// budget, as any row is, and then closes its place: the row's own
// reason stays first in its history.
func TestSkip_AClosingMessageThatFailsForAWhileIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	var closingFailures atomic.Int32
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		switch {
		case r.Key == keys[0] && r.Closed == "":
			return outbox.Permanent(errors.New("injected: the row refused for good"))
		case r.Key == keys[0] && closingFailures.Add(1) <= 2:
			return errors.New("injected: the closing message fails for now")
		}
		return nil
	}}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadSkip), log)
	for range 6 {
		_, err := e.Sweep(ctx)
		require.NoError(t, err)
		h.clock.Advance(time.Minute)
	}
	head := h.row(t, keys[0])
	require.Equal(t, outbox.StatusFailed, head.Status)
	require.Equal(t, outbox.ClosedDeadLetter, head.Closed, "its place closed at the third try: %+v", head.Errors)
	require.Equal(t, []string{keys[0] + "/closed", keys[1]}, sentPlaces(log, "g"))
	require.Len(t, head.Errors, 1, "the closing message's passing failures are not the row's: %+v", head.Errors)
	require.Contains(t, head.LastError, "the row refused for good", "the dead letter shows the row's own reason")
}
