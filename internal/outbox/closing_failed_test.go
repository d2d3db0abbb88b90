package outbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// A closing message that fails for good says whether it may have reached
// the consumer (issue 50, item 3): "may have been sent" (unsure) is kept
// apart from "was not sent" (unsent), for a skipped dead letter's closing
// message and for a purge's, and both keep the place open.
func TestClosingFailed_KeepsMayHaveBeenSentApartFromWasNotSent(t *testing.T) {
	t.Parallel()
	closedAt := time.UnixMilli(1_000_000)
	failedRow := []outbox.AttemptError{{At: closedAt, Attempt: 3, Message: "refused"}}
	failedUnsure := []outbox.AttemptError{{At: closedAt, Attempt: 3, Message: "timeout", Unsure: true}}
	tests := []struct {
		name     string
		closed   string
		errors   []outbox.AttemptError
		unsureAt time.Time
		// unsure says the final send ended unsure, or the claim lapsed.
		unsure bool
		want   string
	}{
		{name: "every send refused for certain", closed: outbox.ClosedDeadLetter, errors: failedRow, want: outbox.ClosedUnsent},
		{name: "its final send ended unsure", closed: outbox.ClosedDeadLetter, errors: failedRow, unsure: true, want: outbox.ClosedUnsure},
		{name: "an earlier send of it ended unsure", closed: outbox.ClosedDeadLetter, errors: failedRow, unsureAt: closedAt.Add(time.Minute), want: outbox.ClosedUnsure},
		{name: "only the row's own send ended unsure, before its place was closed", closed: outbox.ClosedDeadLetter, errors: failedUnsure, unsureAt: closedAt, want: outbox.ClosedUnsent},
		{name: "no history to tell by, and an unsure send", closed: outbox.ClosedDeadLetter, unsureAt: closedAt, want: outbox.ClosedUnsure},
		{name: "a purge's, refused for certain", closed: outbox.ClosedPurged, errors: failedRow, want: outbox.ClosedPurgeUnsent},
		{name: "a purge's, its final send unsure", closed: outbox.ClosedPurged, errors: failedRow, unsure: true, want: outbox.ClosedPurgeUnsure},
		{name: "a purge's after an earlier closing message that may have landed", closed: outbox.ClosedPurged, errors: failedUnsure, unsureAt: closedAt, want: outbox.ClosedPurgeUnsure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := outbox.ClosingFailed(outbox.Row{Closed: tt.closed, Errors: tt.errors, UnsureAt: tt.unsureAt}, tt.unsure)
			require.Equal(t, tt.want, got)
			require.True(t, outbox.PlaceOpen(got), "a closing message that failed for good leaves its place open")
			require.Equal(t, tt.want == outbox.ClosedUnsure || tt.want == outbox.ClosedPurgeUnsure, outbox.MayHaveClosed(got))
		})
	}
}
