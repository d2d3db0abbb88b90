package operate_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// TestOutcomeOf_NamesEveryStateTheDispatcherWritesAndOnlyADeliveredRowAsDelivered
// covers each status and closed the dispatcher and the operator commands
// write together (see OutcomeOf's comment for where each is written),
// with and without a redrive and a failed attempt, and checks that every
// other pair is unknown rather than guessed.
func TestOutcomeOf_NamesEveryStateTheDispatcherWritesAndOnlyADeliveredRowAsDelivered(t *testing.T) {
	t.Parallel()
	const (
		pending, claimed, done, failed = outbox.StatusPending, outbox.StatusClaimed, outbox.StatusDone, outbox.StatusFailed
	)
	tests := []struct {
		status   outbox.Status
		closed   string
		attempts int
		redriven bool
		want     string
		says     string
	}{
		{pending, "", 0, false, operate.OutcomePending, "not yet sent"},
		{pending, "", 2, false, operate.OutcomeRetrying, "2 attempt(s) failed"},
		{pending, "", 0, true, operate.OutcomeRedriven, "waiting to be sent again"},
		{pending, "", 1, true, operate.OutcomeRedriven, "waiting to be sent again"},
		{claimed, "", 1, false, operate.OutcomeClaimed, "being sent now"},
		{claimed, "", 1, true, operate.OutcomeRedriven, "being sent again now"},
		{done, "", 1, false, operate.OutcomeDelivered, "delivered"},
		{done, "", 1, true, operate.OutcomeDelivered, "delivered after a redrive"},
		{pending, outbox.ClosedDeadLetter, 0, false, operate.OutcomeClosing, "closing its place waits to be sent"},
		{claimed, outbox.ClosedDeadLetter, 1, false, operate.OutcomeClosing, "closing its place is being sent now"},
		{pending, outbox.ClosedDeadLetter, 0, true, operate.OutcomeClosing, "dead-lettered after a redrive"},
		{failed, outbox.ClosedDeadLetter, 1, false, operate.OutcomeDeadLetterClosed, "closing its place was sent"},
		{pending, outbox.ClosedPurged, 0, false, operate.OutcomePurging, "waits to be sent in its stead"},
		{claimed, outbox.ClosedPurged, 1, false, operate.OutcomePurging, "is being sent now in its stead"},
		{done, outbox.ClosedPurged, 1, false, operate.OutcomePurged, "its own message was not delivered; the message closing its place was sent"},
		{failed, "", 3, false, operate.OutcomeDeadLetter, "its own message was not delivered"},
		{failed, "", 3, true, operate.OutcomeDeadLetter, "dead-lettered after a redrive"},
		{failed, outbox.ClosedUnsent, 3, false, operate.OutcomeDeadLetterUnsent, "was not sent either"},
		{failed, outbox.ClosedUnsure, 1, false, operate.OutcomeDeadLetterUnsure, "may have reached the consumer"},
		{failed, outbox.ClosedPurgeUnsent, 3, false, operate.OutcomePurgedUnsent, "closing its place was not sent"},
		{failed, outbox.ClosedPurgeUnsure, 1, false, operate.OutcomePurgedUnsure, "may have reached the consumer"},
		// A store's size refusal of a purge's closing message keeps
		// closed purged on a failed row: it may have gone.
		{failed, outbox.ClosedPurged, 1, false, operate.OutcomePurgedUnsure, "may have reached the consumer"},
	}
	written := map[string]bool{}
	for _, tt := range tests {
		written[string(tt.status)+"/"+tt.closed] = true
		t.Run(fmt.Sprintf("%s closed %q attempts %d redriven %t", tt.status, tt.closed, tt.attempts, tt.redriven), func(t *testing.T) {
			t.Parallel()
			got := operate.OutcomeOf(tt.status, tt.closed, tt.attempts, tt.redriven, false)
			require.Equal(t, tt.want, got.Name)
			require.Contains(t, got.Detail, tt.says)
			require.Equal(t, tt.want == operate.OutcomeDelivered, got.Delivered(), "only a delivered row went out")
		})
	}

	// Every other pair is one the dispatcher never writes: unknown, with
	// both named, never delivered.
	statuses := []outbox.Status{pending, claimed, done, failed, "", "odd"}
	closeds := []string{"", outbox.ClosedDeadLetter, outbox.ClosedPurged, outbox.ClosedUnsent, outbox.ClosedUnsure,
		outbox.ClosedPurgeUnsent, outbox.ClosedPurgeUnsure, "odd"}
	for _, status := range statuses {
		for _, closed := range closeds {
			if written[string(status)+"/"+closed] {
				continue
			}
			got := operate.OutcomeOf(status, closed, 1, false, false)
			require.Equal(t, operate.OutcomeUnknown, got.Name, "status %q closed %q", status, closed)
			require.Contains(t, got.Detail, fmt.Sprintf("status %q with closed %q", status, closed))
			require.False(t, got.Delivered())
		}
	}
}

// A row a send of which ended with its outcome unknown (unsure_at set)
// is never said to be undelivered: its message may have landed, and been
// applied (review R50-3).
func TestOutcomeOf_ARowWhoseSendEndedUnsureMayHaveBeenDelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status outbox.Status
		closed string
		want   string
	}{
		{outbox.StatusFailed, "", operate.OutcomeDeadLetter},
		{outbox.StatusFailed, outbox.ClosedDeadLetter, operate.OutcomeDeadLetterClosed},
		{outbox.StatusFailed, outbox.ClosedUnsent, operate.OutcomeDeadLetterUnsent},
		{outbox.StatusDone, outbox.ClosedPurged, operate.OutcomePurged},
		{outbox.StatusPending, outbox.ClosedPurged, operate.OutcomePurging},
	}
	for _, tt := range tests {
		t.Run(string(tt.status)+" "+tt.closed, func(t *testing.T) {
			t.Parallel()
			got := operate.OutcomeOf(tt.status, tt.closed, 1, false, true)
			require.Equal(t, tt.want, got.Name)
			require.Contains(t, got.Detail, "its own message may have been delivered")
			require.NotContains(t, got.Detail, "was not delivered")
			require.False(t, got.Delivered(), "not a yes either")
		})
	}
}
