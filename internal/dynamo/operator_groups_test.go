package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// deadAt claims the staged row key at failedAt and dead-letters it.
func deadAt(t *testing.T, s *dynamo.Store, key string, failedAt time.Time) {
	t.Helper()
	row := claim(t, s, key, failedAt)
	require.NoError(t, s.DeadLetter(context.Background(), row, failedAt, []outbox.AttemptError{{At: failedAt, Attempt: 1, Message: "injected"}}))
}

func TestOperatorStats_CountsTheGroupsWhoseEarliestDeadLetterBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	s := op.Store
	for _, r := range []outbox.Row{
		orderedRow("a1", "a"), orderedRow("a2", "a"), orderedRow("a3", "a"),
		orderedRow("b1", "b"), orderedRow("b2", "b"),
		orderedRow("c1", "c"),
	} {
		require.NoError(t, s.StageOrdered(ctx, r, t0))
	}
	// An unordered dead letter of a FIFO route, and one of a standard route.
	require.NoError(t, s.Stage(ctx, outbox.Row{Key: "loose", Queue: "events.fifo", Group: "a", Payload: []byte(`{}`)}, t0))
	stage(t, s, "std")
	// Group a: its second and third rows are dead (as after a change of
	// policy); the second holds the group, since it fails first by place.
	deadAt(t, s, "a3", t0.Add(time.Minute))
	deadAt(t, s, "a2", t0.Add(2*time.Minute))
	// Group b: its head is dead, the oldest of the blocking heads.
	deadAt(t, s, "b1", t0.Add(90*time.Second))
	for _, k := range []string{"loose", "std", "c1"} {
		deadAt(t, s, k, t0)
	}

	var asked []string
	blocks := func(d dynamo.DeadRef) bool {
		asked = append(asked, d.Key)
		return d.Key != "c1" // c's route would be skip
	}
	st, err := op.Stats(ctx, t0.Add(time.Hour), blocks)
	require.NoError(t, err)
	require.Equal(t, 2, st.BlockedGroups, "a and b; c's head does not block")
	require.Equal(t, t0.Add(90*time.Second), st.OldestBlocked, "b1's failure: a is held by a2, not a3")
	require.ElementsMatch(t, []string{"a2", "b1", "c1"}, asked, "only each group's earliest dead letter is asked")
	require.Equal(t, 6, st.Total.Failed)

	st, err = op.Stats(ctx, t0.Add(time.Hour), nil)
	require.NoError(t, err)
	require.Zero(t, st.BlockedGroups, "no blocks, no count")

	// A purged head and a redriven one no longer hold their groups; a3,
	// now a's earliest dead letter, does.
	require.NoError(t, op.Purge(ctx, "b1", time.Now(), time.Time{}, dynamo.UnsureBound{}))
	require.NoError(t, s.Redrive(ctx, "a2", t0.Add(time.Hour)))
	st, err = op.Stats(ctx, t0.Add(time.Hour), blocks)
	require.NoError(t, err)
	require.Equal(t, 1, st.BlockedGroups)
	require.Equal(t, t0.Add(time.Minute), st.OldestBlocked)
}

func TestOperatorWithGroups_ReadsGroupsOfFIFODeadLettersOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: awstest.NewTable(t), Shards: 4})
	require.NoError(t, err)
	s := op.Store
	require.NoError(t, s.StageOrdered(ctx, orderedRow("a1", "a"), t0))
	require.NoError(t, s.StageOrdered(ctx, orderedRow("a2", "a"), t0))
	stage(t, s, "std")
	deadAt(t, s, "a1", t0)
	deadAt(t, s, "std", t0)

	refs, err := op.ListDead(ctx, dynamo.DeadQuery{}, 0)
	require.NoError(t, err)
	refs = append(refs, dynamo.DeadRef{Key: "a2", Queue: "events.fifo"}, dynamo.DeadRef{Key: "gone", Queue: "events.fifo"})
	got, err := op.WithGroups(ctx, refs)
	require.NoError(t, err)
	byKey := map[string]dynamo.DeadRef{}
	for _, d := range got {
		byKey[d.Key] = d
	}
	require.Len(t, got, 2, "a2 is pending and gone is gone: neither is a dead letter")
	require.Equal(t, "a", byKey["a1"].Group)
	require.Equal(t, int64(1), byKey["a1"].Seq)
	require.Equal(t, t0, byKey["a1"].FailedAt, "what the index gave is kept")
	require.Empty(t, byKey["std"].Group)
	require.Zero(t, byKey["std"].Seq)

	none, err := op.WithGroups(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
