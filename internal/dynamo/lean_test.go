package dynamo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// stageLean stages a lean row (no shard) at at, and returns it as stored.
func stageLean(t *testing.T, s *dynamo.Store, key string, at time.Time) outbox.Row {
	t.Helper()
	row := outbox.Row{Key: key, Queue: "orders", Payload: []byte(`{"id":1}`), Unindexed: true}
	require.NoError(t, s.Stage(context.Background(), row, at))
	got := get(t, s, key)
	require.NotNil(t, got)
	return *got
}

func TestStore_ALeanRowStaysOutOfTheDueIndexUntilItIsHandedOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)

	row := stageLean(t, s, "lean", t0)
	require.True(t, row.Unindexed, "read back as unindexed")
	require.Equal(t, outbox.StatusPending, row.Status)
	require.Equal(t, t0, row.DueAt, "due at once, as an indexed row")
	require.Empty(t, awstest.DueKeys(t, s, t0.Add(time.Hour)), "no due-index entry")

	require.NoError(t, s.Index(ctx, unclaimed(row)))
	require.Equal(t, []string{"lean"}, awstest.DueKeys(t, s, t0.Add(time.Hour)), "handed over: in the due index as it was")
	requireConflict(t, s.Index(ctx, unclaimed(row)))
	got := get(t, s, "lean")
	require.False(t, got.Unindexed)
	require.Equal(t, 0, got.Attempt, "indexing spends no attempt")

	// A done still applies to the row as staged: indexing is not a claim.
	require.NoError(t, s.Done(ctx, unclaimed(row), t0))
	require.Nil(t, get(t, s, "lean"))
	require.Empty(t, awstest.DueKeys(t, s, t0.Add(time.Hour)))
}

func TestStore_ALeanRowEntersTheDueIndexWithAnySettleThatLeavesItToTheSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hist := []outbox.AttemptError{{At: t0, Attempt: 1, Message: "boom"}}
	cases := []struct {
		name    string
		settle  func(s *dynamo.Store, row outbox.Row) error
		indexed bool
	}{
		{"a retry of the unclaimed send", func(s *dynamo.Store, row outbox.Row) error {
			return s.Retry(ctx, unclaimed(row), t0.Add(time.Second), hist)
		}, true},
		{"a release of a claim", func(s *dynamo.Store, row outbox.Row) error {
			return s.Release(ctx, claim(t, s, row.Key, t0))
		}, true},
		{"a retry of a claim", func(s *dynamo.Store, row outbox.Row) error {
			return s.Retry(ctx, claim(t, s, row.Key, t0), t0.Add(time.Second), hist)
		}, true},
		{"a dead-lettering", func(s *dynamo.Store, row outbox.Row) error {
			return s.DeadLetter(ctx, unclaimed(row), t0, hist)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, 0)
			row := stageLean(t, s, "lean", t0)
			require.NoError(t, tc.settle(s, row))
			keys := awstest.DueKeys(t, s, t0.Add(time.Hour))
			if tc.indexed {
				require.Equal(t, []string{"lean"}, keys)
			} else {
				require.Empty(t, keys)
			}
		})
	}
}

// newBackstop is a backstop over a fresh table of 4 shards, with the
// counting client, a wake grace of 15 s, and lean on.
func newBackstop(t *testing.T) (*dynamo.Backstop, *dynamo.Store, *countingAPI) {
	t.Helper()
	api := &countingAPI{Client: awstest.DynamoDB(t)}
	cfg := dynamo.Config{Table: awstest.NewTable(t), Shards: 4}
	b, err := dynamo.NewBackstop(api, cfg, 15*time.Second, true)
	require.NoError(t, err)
	s, err := dynamo.New(awstest.DynamoDB(t), cfg)
	require.NoError(t, err)
	return b, s, api
}

func TestBackstop_IndexesOnlyUnindexedRowsOlderThanTheWakeGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := newBackstop(t)
	now := t0.Add(time.Minute)

	stageLean(t, s, "missed", t0)
	stageLean(t, s, "young", now.Add(-5*time.Second))
	stage(t, s, "indexed")
	crashed := stageLean(t, s, "crashed", t0)
	claimed := claim(t, s, crashed.Key, t0) // a wake that claimed it, then died
	require.True(t, claimed.Unindexed)
	stageLean(t, s, "sent", t0)
	require.NoError(t, s.Done(ctx, unclaimed(*get(t, s, "sent")), t0))
	stageLean(t, s, "dead", t0)
	require.NoError(t, s.DeadLetter(ctx, unclaimed(*get(t, s, "dead")), t0, nil))

	res, err := b.Run(ctx, now)
	require.NoError(t, err)
	require.True(t, res.Ran)
	require.True(t, res.PassDone, "a small table is one page")
	require.ElementsMatch(t, []string{"missed", "crashed"}, res.Keys)
	require.Equal(t, 2, res.Indexed)
	require.Equal(t, time.Minute, res.LongestWait)
	require.ElementsMatch(t, []string{"missed", "indexed", "crashed"}, awstest.DueKeys(t, s, now))
	got := get(t, s, "crashed")
	require.Equal(t, outbox.StatusClaimed, got.Status, "its claim is kept: the sweep takes it over once the lease lapses")
	require.Equal(t, claimed.Token, got.Token)
	require.True(t, get(t, s, "young").Unindexed, "a row younger than the grace is the wake's")

	counts, err := s.Backstopped(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, counts.LastPass)
	require.Equal(t, 2, counts.Total)
	require.Equal(t, time.Minute, counts.LongestWait)
	require.Equal(t, now, counts.LastPassEnded)
	require.Equal(t, now, counts.LeanAt)

	again, err := b.Run(ctx, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{"young"}, again.Keys, "the next pass finds the row that has aged past the grace, and nothing twice")
}

func TestBackstop_ResumesAcrossRunsWithinItsPageBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, api := newBackstop(t)
	b.Pages, b.PageSize = 1, 2
	keys := []string{"a", "b", "c", "d", "e"}
	for _, k := range keys {
		stageLean(t, s, k, t0)
	}
	now := t0.Add(time.Minute)
	var found []string
	runs := 0
	for {
		api.take()
		res, err := b.Run(ctx, now)
		require.NoError(t, err)
		scans, _ := api.take()
		require.Equal(t, 1, scans, "one page per run")
		runs++
		found = append(found, res.Keys...)
		if res.PassDone {
			break
		}
		require.Less(t, runs, 10, "the pass must end")
	}
	require.ElementsMatch(t, keys, found, "every row once")
	require.GreaterOrEqual(t, runs, 3, "5 items in pages of 2")
	counts, err := s.Backstopped(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, counts.LastPass)
	require.Zero(t, counts.ThisPass)
}

func TestBackstop_KeepsRunningForItsDrainAfterLeanIsSwitchedOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, api := newBackstop(t)
	b.Lean, b.Drain = false, time.Hour

	res, err := b.Run(ctx, t0)
	require.NoError(t, err)
	require.False(t, res.Ran, "never lean: nothing to look for")
	scans, writes := api.take()
	require.Zero(t, scans)
	require.Empty(t, writes, "a stack that never ran lean pays nothing")

	b.Lean = true
	_, err = b.Run(ctx, t0)
	require.NoError(t, err)
	b.Lean = false
	stageLean(t, s, "late", t0.Add(30*time.Minute)) // a producer that still reads lean on
	res, err = b.Run(ctx, t0.Add(50*time.Minute))
	require.NoError(t, err)
	require.True(t, res.Ran, "within the drain")
	require.Equal(t, []string{"late"}, res.Keys)

	res, err = b.Run(ctx, t0.Add(50*time.Minute+59*time.Minute))
	require.NoError(t, err)
	require.True(t, res.Ran, "finding a row restarted the drain")
	res, err = b.Run(ctx, t0.Add(50*time.Minute+61*time.Minute))
	require.NoError(t, err)
	require.False(t, res.Ran, "an hour after the last sighting it stops")
}

func TestBackstop_LeavesARowSettledBetweenItsScanAndItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, api := newBackstop(t)
	row := stageLean(t, s, "raced", t0)
	api.faults = map[string]func() error{"raced": func() error {
		return s.Done(ctx, unclaimed(row), t0) // the wake's settle lands first
	}}
	res, err := b.Run(ctx, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Zero(t, res.Indexed)
	require.Equal(t, 1, res.Changed)
	require.Nil(t, get(t, s, "raced"), "settled, not brought back")
}

func TestBackstop_AFailedWriteIsReadAgainByTheNextRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, api := newBackstop(t)
	stageLean(t, s, "flaky", t0)
	api.faults = map[string]func() error{"flaky": func() error { return errors.New("connection reset") }}
	res, err := b.Run(ctx, t0.Add(time.Minute))
	require.Error(t, err)
	require.Equal(t, 1, res.Errors)
	require.False(t, res.PassDone, "the place stays before the row")
	res, err = b.Run(ctx, t0.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{"flaky"}, res.Keys)
}
