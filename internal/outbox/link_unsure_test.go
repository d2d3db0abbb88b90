package outbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// TestLink_AnUnsureDeadHeadUnderSkipWaitsItsTimeThenSettles: a dead head
// a send of which ended unsure neither settles nor blocks under skip until
// UnsureWait has passed since that send; under block it blocks as any dead
// head does; one never unsure settles at once under skip.
func TestLink_AnUnsureDeadHeadUnderSkipWaitsItsTimeThenSettles(t *testing.T) {
	t.Parallel()
	failed := time.UnixMilli(1_800_000_000_000)
	wait := outbox.DefaultPolicy().UnsureWait()
	dead := func(unsure bool) outbox.Link {
		// Its place closed, as skip does before it goes past a dead
		// letter (one never closed waits for that: Link.Unclosed).
		l := outbox.Link{Found: true, Status: outbox.StatusFailed, Queue: "q.fifo", Seq: 1, FailedAt: failed.Add(time.Minute), Closed: outbox.ClosedDeadLetter}
		if unsure {
			l.UnsureAt = failed // an earlier attempt's send; the row failed later
		}
		return l
	}
	tests := []struct {
		name    string
		link    outbox.Link
		dh      outbox.DeadHead
		at      time.Duration
		settles bool
		blocks  bool
	}{
		{"unsure, skip, just failed", dead(true), outbox.DeadHeadSkip, 0, false, false},
		{"unsure, skip, a moment before the wait ends", dead(true), outbox.DeadHeadSkip, wait - time.Millisecond, false, false},
		{"unsure, skip, the wait over", dead(true), outbox.DeadHeadSkip, wait, true, false},
		{"unsure, block", dead(true), outbox.DeadHeadBlock, 2 * wait, false, true},
		{"definite, skip", dead(false), outbox.DeadHeadSkip, 0, true, false},
		{"definite, block", dead(false), outbox.DeadHeadBlock, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.settles, tt.link.SettlesAt(tt.dh, failed.Add(tt.at), wait))
			require.Equal(t, tt.blocks, tt.link.Blocks(tt.dh))
			require.Equal(t, tt.blocks, outbox.DeadLetterBlocks(map[string]outbox.DeadHead{"q.fifo": tt.dh}, tt.link), "operators see what the engine does")
		})
	}
	require.Equal(t, outbox.DefaultPolicy().CallTimeout()+outbox.UnsureMargin, wait)
}
