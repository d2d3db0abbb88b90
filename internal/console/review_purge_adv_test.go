package console_test

// Adversarial review of the purge hold (71ba2ec).

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/console"
	"github.com/outflowhq/outflow/internal/outbox"
)

// ATTACK (invariant 2): the console counts the unsure wait from the
// moment the confirmation was shown (t.At), not from the moment the
// operator presses its button. A dead letter whose window closed between
// the two is held all the same, with a held_until already in the past,
// and the same confirmation holds it again however late it is pressed.
func TestAdv_AConfirmationPressedAfterTheWaitPurgesTheRow(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	t0 := time.Now().Truncate(time.Millisecond)
	now := t0
	const wait = outbox.MinUnsureWait
	r := newRig(t, "none", func(c *console.Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		c.UnsureWait = func(context.Context) (time.Duration, error) { return wait, nil }
	})
	unsureAt := t0.Add(-10 * time.Second) // its window closes at t0+51s

	for _, form := range []url.Values{{"key": {"late"}}, {"queue": {"q.fifo"}}} {
		mu.Lock()
		now = t0
		mu.Unlock()
		row := deadRow("late", "q.fifo", unsureAt, []byte("x"))
		row.Group, row.UnsureAt = "g", unsureAt
		row.Errors[0].Unsure = true
		r.put(t, row, nil)
		form.Set("csrf", r.c.CSRF())
		_, body, _ := do(t, "POST", r.url+"/purge", "", form, nil)
		i := strings.Index(body, `name="at" value="`)
		require.GreaterOrEqual(t, i, 0, body)
		rest := body[i+len(`name="at" value="`):]
		at := rest[:strings.Index(rest, `"`)]

		// The operator reads the confirmation for two minutes, then presses it.
		mu.Lock()
		now = t0.Add(2 * time.Minute)
		mu.Unlock()
		form.Set("confirm", "yes")
		form.Set("at", at)
		_, body, _ = do(t, "POST", r.url+"/purge", "", form, nil)
		if j := strings.Index(body, `id="held"`); j >= 0 {
			t.Logf("%v at %s: %s", form, now.UTC().Format(time.RFC3339), body[j:j+120])
		}
		require.Contains(t, body, "Purged 1", "pressed at t0+2m, after the row's window closed (t0+51s)")
		require.Equal(t, outbox.Status(""), r.status(t, "late"))
	}
}
