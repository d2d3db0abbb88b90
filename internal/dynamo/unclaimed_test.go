package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// unclaimed is row as the wake sends it without a claim: its stream image,
// at attempt 1.
func unclaimed(row outbox.Row) outbox.Row {
	row.Attempt, row.Unclaimed = 1, true
	return row
}

func TestStore_UnclaimedSettlesApplyToTheRowAsStaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hist := []outbox.AttemptError{{At: t0, Attempt: 1, Message: "boom"}}
	s := newStore(t, 0)

	require.NoError(t, s.Done(ctx, unclaimed(stage(t, s, "done")), t0))
	require.Nil(t, get(t, s, "done"), "a delivered row is deleted by the one settle")

	require.NoError(t, s.Retry(ctx, unclaimed(stage(t, s, "retry")), t0.Add(time.Second), hist))
	got := get(t, s, "retry")
	require.Equal(t, outbox.StatusPending, got.Status)
	require.Equal(t, 1, got.Attempt, "the failed send spent an attempt, with no claim to count it")
	require.Equal(t, t0.Add(time.Second), got.DueAt)
	require.Equal(t, "boom", got.LastError)

	require.NoError(t, s.DeadLetter(ctx, unclaimed(stage(t, s, "dead")), t0, hist))
	got = get(t, s, "dead")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, 1, got.Attempt)

	kept := newStore(t, time.Hour)
	require.NoError(t, kept.Done(ctx, unclaimed(stage(t, kept, "kept")), t0))
	require.Equal(t, outbox.StatusDone, get(t, kept, "kept").Status)
}

// TestStore_UnclaimedSettlesAreRefusedOnceTheRowMoved is the races of the
// claim-free path: whatever happened to the row between the wake's send
// and its settle, the settle applies only if nothing did, and never
// overwrites or settles another worker's attempt.
func TestStore_UnclaimedSettlesAreRefusedOnceTheRowMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hist := []outbox.AttemptError{{At: t0, Attempt: 1, Message: "boom"}}
	after := t0.Add(20 * time.Second) // past the wake grace: the sweep may claim
	cases := []struct {
		name string
		// between does what happens between the send and the settle, and
		// returns the row as it must stay.
		between func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row
	}{
		{"a sweep claimed it", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			c := claim(t, s, sent.Key, after)
			return &c
		}},
		{"a sweep's claim lapsed (settle after the lease)", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			claim(t, s, sent.Key, after)
			return get(t, s, sent.Key) // claimed, its lease long past at the settle below
		}},
		{"a sweep claimed and released it, unsent", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			require.NoError(t, s.Release(ctx, claim(t, s, sent.Key, after)))
			return get(t, s, sent.Key)
		}},
		{"a sweep's attempt failed and waits for its retry", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			require.NoError(t, s.Retry(ctx, claim(t, s, sent.Key, after), after.Add(time.Second), hist))
			return get(t, s, sent.Key)
		}},
		{"a sweep delivered it", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			require.NoError(t, s.Done(ctx, claim(t, s, sent.Key, after), after))
			return nil
		}},
		{"it was dead-lettered and redriven", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			require.NoError(t, s.DeadLetter(ctx, claim(t, s, sent.Key, after), after, hist))
			require.NoError(t, s.Redrive(ctx, sent.Key, after))
			return get(t, s, sent.Key)
		}},
		{"a duplicate wake invocation delivered it", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			require.NoError(t, s.Done(ctx, sent, t0))
			return nil
		}},
		{"a duplicate wake invocation failed to send it", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			require.NoError(t, s.Retry(ctx, sent, t0.Add(time.Second), hist))
			return get(t, s, sent.Key)
		}},
		{"it was delivered and the key staged again", func(t *testing.T, s *dynamo.Store, sent outbox.Row) *outbox.Row {
			require.NoError(t, s.Done(ctx, sent, t0))
			again := outbox.Row{Key: sent.Key, Queue: "orders", Payload: []byte(`{"id":2}`)}
			require.NoError(t, s.Stage(ctx, again, t0.Add(time.Millisecond)))
			return get(t, s, sent.Key)
		}},
	}
	settles := []struct {
		name string
		do   func(s *dynamo.Store, sent outbox.Row) error
	}{
		{"done", func(s *dynamo.Store, sent outbox.Row) error { return s.Done(ctx, sent, after) }},
		{"retry", func(s *dynamo.Store, sent outbox.Row) error { return s.Retry(ctx, sent, after.Add(time.Minute), hist) }},
		{"dead-letter", func(s *dynamo.Store, sent outbox.Row) error { return s.DeadLetter(ctx, sent, after, hist) }},
	}
	for _, tc := range cases {
		for _, settle := range settles {
			t.Run(tc.name+", then the wake's "+settle.name, func(t *testing.T) {
				t.Parallel()
				s := newStore(t, 0)
				sent := unclaimed(stage(t, s, "k"))
				want := tc.between(t, s, sent)
				requireConflict(t, settle.do(s, sent))
				require.Equal(t, want, get(t, s, "k"), "the refused settle left the row as it was")
			})
		}
	}
}
