package dynamo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
)

// Probe (held): the backstop's saved cursor names an item deleted before
// the next run (the wake settled it with no retention); the pass goes on
// and finds every missed row.
func TestReviewLeanProbe_CursorOnADeletedItem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := newBackstop(t)
	b.Pages, b.PageSize = 1, 3
	var keys []string
	for i := range 9 {
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, k)
		stageLean(t, s, k, t0)
	}
	now := t0.Add(time.Minute)
	res, err := b.Run(ctx, now)
	require.NoError(t, err)
	found := append([]string(nil), res.Keys...)
	last := found[len(found)-1]
	// settle the row the cursor names: delete it
	require.NoError(t, s.Done(ctx, claim(t, s, last, now), now))
	for i := 0; i < 20 && !res.PassDone; i++ {
		res, err = b.Run(ctx, now)
		require.NoError(t, err)
		found = append(found, res.Keys...)
	}
	require.True(t, res.PassDone)
	require.ElementsMatch(t, keys, found)
}

// Probe (held): a lean row dead-lettered by the wake's unclaimed send,
// then redriven, is in the due index again.
func TestReviewLeanProbe_RedriveOfALeanDeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)
	row := stageLean(t, s, "dead", t0)
	require.NoError(t, s.DeadLetter(ctx, unclaimed(row), t0, nil))
	require.NoError(t, s.Redrive(ctx, "dead", t0.Add(time.Minute)))
	require.Equal(t, []string{"dead"}, awstest.DueKeys(t, s, t0.Add(time.Hour)))
	got := get(t, s, "dead")
	require.False(t, got.Unindexed)
}
