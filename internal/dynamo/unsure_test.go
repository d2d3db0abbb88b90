package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// TestStore_KeepsTheLatestUnsureSendForTheHeadCheck: the head check reads
// when a row's last send of unknown outcome was (unsure_at), so that under
// skip its group waits until no copy of it can land. A retry and a dead
// letter store the row's UnsureAt; a later definite failure, and a
// redrive, keep it; a claim that takes over a lapsed claim sets it (the
// lapsed holder may have sent the row).
func TestStore_KeepsTheLatestUnsureSendForTheHeadCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	unsureAt := func(t *testing.T, s interface {
		Link(context.Context, string) (outbox.Link, error)
	}, key string) time.Time {
		t.Helper()
		l, err := s.Link(ctx, key)
		require.NoError(t, err)
		return l.UnsureAt
	}

	t.Run("retry, then a definite dead letter, then a redrive", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, 0)
		stage(t, s, "p")
		row := claim(t, s, "p", t0)
		row.UnsureAt = t0.Add(time.Second) // attempt 1 timed out
		require.NoError(t, s.Retry(ctx, row, t0.Add(2*time.Second), nil))
		require.Equal(t, t0.Add(time.Second), unsureAt(t, s, "p"))

		row = claim(t, s, "p", t0.Add(3*time.Second))
		require.Equal(t, t0.Add(time.Second), row.UnsureAt, "the claim reads it back")
		require.NoError(t, s.DeadLetter(ctx, row, t0.Add(4*time.Second), nil)) // attempt 2 refused: UnsureAt unchanged
		require.Equal(t, t0.Add(time.Second), unsureAt(t, s, "p"), "a definite failure later does not hide it")

		require.NoError(t, s.Redrive(ctx, "p", t0.Add(5*time.Second)))
		require.Equal(t, t0.Add(time.Second), unsureAt(t, s, "p"), "nor does a redrive")
	})

	t.Run("a claim that takes over a lapsed claim", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, 0)
		stage(t, s, "p")
		claim(t, s, "p", t0)
		require.True(t, unsureAt(t, s, "p").IsZero(), "a first claim sets nothing")
		later := t0.Add(lease + time.Second)
		row := claim(t, s, "p", later)
		require.Equal(t, later, row.UnsureAt)
		require.Equal(t, later, unsureAt(t, s, "p"))
	})

	t.Run("never unsure", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, 0)
		stage(t, s, "p")
		row := claim(t, s, "p", t0)
		require.NoError(t, s.DeadLetter(ctx, row, t0, []outbox.AttemptError{{At: t0, Attempt: 1, Message: "refused"}}))
		require.True(t, unsureAt(t, s, "p").IsZero())
	})
}
