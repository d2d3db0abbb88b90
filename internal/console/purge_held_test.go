package console_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/console"
	"github.com/outflowhq/outflow/internal/outbox"
)

// A purge from the console holds a dead letter a send of which ended
// unsure too recently to rule out a late copy, as outflow dead purge
// does, and says until when; once the dispatcher's wait has passed, it
// goes.
func TestPurge_HoldsADeadLetterWhoseSendMayStillLandAndSaysUntilWhen(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		wait   time.Duration // the dispatcher's; 0: none published
		purged bool
	}{
		{"nothing published: the longest wait", 0, false},
		{"within the dispatcher's wait", 20 * time.Minute, false},
		{"past the dispatcher's wait", outbox.MinUnsureWait, true},
		{"a wait no dispatcher has: the longest", 5 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, "none", func(c *console.Config) {
				if tt.wait > 0 {
					c.UnsureWait = func(context.Context) (time.Duration, error) { return tt.wait, nil }
				}
			})
			unsureAt := time.Now().Add(-2 * time.Minute).Truncate(time.Millisecond)
			row := deadRow("late", "q.fifo", unsureAt, []byte("x"))
			row.Group, row.UnsureAt = "g", unsureAt
			row.Errors[0].Unsure = true
			r.put(t, row, nil)

			_, body, _ := do(t, "POST", r.url+"/purge", "", url.Values{"key": {"late"}, "csrf": {r.c.CSRF()}, "confirm": {"yes"}}, nil)
			if tt.purged {
				require.Contains(t, body, "Purged 1, skipped 0")
				require.NotContains(t, body, `id="held"`)
				require.Equal(t, outbox.Status(""), r.status(t, "late"))
				return
			}
			wait := tt.wait
			if wait < outbox.MinUnsureWait {
				wait = outbox.MaxUnsureWait
			}
			require.Contains(t, body, "Purged 0, skipped 0")
			require.Contains(t, body, `id="held">Held 1: a send of theirs ended unsure and may still land until `+unsureAt.Add(wait+time.Second-1).Truncate(time.Second).UTC().Format(time.RFC3339))
			require.Equal(t, outbox.StatusFailed, r.status(t, "late"))
		})
	}
}
