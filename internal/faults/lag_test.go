package faults_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// memIndex is a strongly consistent due index in memory, one shard: what
// IndexLag wraps. Only the calls IndexLag makes are implemented.
type memIndex struct {
	outbox.Store
	rows map[string]outbox.DueRef
}

func (m *memIndex) QueryDue(_ context.Context, _ int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	var all []outbox.DueRef
	for _, r := range m.rows {
		if !r.DueAt.After(now) {
			all = append(all, r)
		}
	}
	slices.SortFunc(all, func(a, b outbox.DueRef) int { return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.Key, b.Key)) })
	if after != nil {
		all = slices.DeleteFunc(all, func(r outbox.DueRef) bool {
			return cmp.Or(r.DueAt.Compare(after.DueAt), cmp.Compare(r.Key, after.Key)) <= 0
		})
	}
	if len(all) > limit {
		return all[:limit], true, nil
	}
	return all, false, nil
}

func (m *memIndex) Shards() int { return 1 }

// row is the row of key as a writer holds it: what its index entry says.
func (m *memIndex) row(key string) outbox.Row {
	r := m.rows[key]
	return outbox.Row{Key: key, DueAt: r.DueAt, CreatedAt: r.CreatedAt}
}

func (m *memIndex) Done(_ context.Context, row outbox.Row, _ time.Time) error {
	delete(m.rows, row.Key)
	return nil
}

func (m *memIndex) Retry(_ context.Context, row outbox.Row, dueAt time.Time, _ []outbox.AttemptError) error {
	r := m.rows[row.Key]
	r.DueAt = dueAt
	m.rows[row.Key] = r
	return nil
}

// query pages through the whole index as the engine does, returning keys
// in the order met.
func query(t *testing.T, s outbox.Store, now time.Time, limit int) []string {
	t.Helper()
	var keys []string
	var after *outbox.DueRef
	for {
		refs, more, err := s.QueryDue(context.Background(), 0, now, after, limit)
		require.NoError(t, err)
		for _, r := range refs {
			keys = append(keys, r.Key)
		}
		if !more || len(refs) == 0 {
			return keys
		}
		after = &refs[len(refs)-1]
	}
}

const maxLag = time.Second

func newIndex(t0 time.Time, n int) *memIndex {
	m := &memIndex{rows: map[string]outbox.DueRef{}}
	for i := range n {
		key := fmt.Sprintf("k%03d", i)
		// Staged long before t0, due a millisecond apart: within the lag
		// of each other.
		m.rows[key] = outbox.DueRef{Key: key, DueAt: t0.Add(-time.Hour + time.Duration(i)*time.Millisecond), CreatedAt: t0.Add(-2 * time.Hour)}
	}
	return m
}

func TestIndexLag_ShowsASettledRowsEntryUntilTheWriteReachesTheIndex(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	m := newIndex(t0, 3)
	lag := faults.NewIndexLag(m, 7, maxLag)
	require.ElementsMatch(t, []string{"k000", "k001", "k002"}, query(t, lag, t0, 10))

	require.NoError(t, lag.Done(context.Background(), m.row("k001"), t0))
	require.ElementsMatch(t, []string{"k000", "k001", "k002"}, query(t, lag, t0, 10), "stale: the delete has not reached the index")
	require.Equal(t, 1, lag.Counts().Stale)
	require.ElementsMatch(t, []string{"k000", "k002"}, query(t, lag, t0.Add(maxLag), 10), "the delete reached the index")
}

func TestIndexLag_ShowsARetriedRowAtItsOldDueTimeUntilTheWriteReachesTheIndex(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	m := newIndex(t0, 2)
	lag := faults.NewIndexLag(m, 7, maxLag)
	require.Len(t, query(t, lag, t0, 10), 2)

	// Due again at once: the new entry is there in the table's index, not
	// yet in the lagging one, which shows the old.
	require.NoError(t, lag.Retry(context.Background(), m.row("k000"), t0, []outbox.AttemptError{{At: t0}}))
	refs, _, err := lag.QueryDue(context.Background(), 0, t0, nil, 10)
	require.NoError(t, err)
	require.Len(t, refs, 2)
	for _, r := range refs {
		if r.Key == "k000" {
			require.Equal(t, t0.Add(-time.Hour), r.DueAt, "the old entry")
		}
	}
	refs, _, err = lag.QueryDue(context.Background(), 0, t0.Add(maxLag), nil, 10)
	require.NoError(t, err)
	require.Len(t, refs, 2)
	for _, r := range refs {
		if r.Key == "k000" {
			require.Equal(t, t0, r.DueAt, "the new entry")
		}
	}
}

func TestIndexLag_LeavesOutRowsStagedWithinTheirLag(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	m := &memIndex{rows: map[string]outbox.DueRef{}}
	for i := range 50 {
		key := fmt.Sprintf("new%02d", i)
		m.rows[key] = outbox.DueRef{Key: key, DueAt: t0, CreatedAt: t0}
	}
	lag := faults.NewIndexLag(m, 7, maxLag)
	require.Empty(t, query(t, lag, t0, 10), "staged just now: none reached the index")
	half := len(query(t, lag, t0.Add(maxLag/2), 10))
	require.Greater(t, half, 0, "each row has its own lag")
	require.Less(t, half, 50)
	require.Len(t, query(t, lag, t0.Add(maxLag), 10), 50)
	require.Positive(t, lag.Counts().Missing)
}

func TestIndexLag_PagesMeetEveryEntryOnceInADisturbedOrder(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	m := newIndex(t0, 100)
	lag := faults.NewIndexLag(m, 7, maxLag)
	require.Len(t, query(t, lag, t0, 1000), 100)
	for i := 0; i < 100; i += 3 {
		require.NoError(t, lag.Done(context.Background(), m.row(fmt.Sprintf("k%03d", i)), t0))
	}
	for _, limit := range []int{1, 7, 1000} {
		keys := query(t, lag, t0, limit)
		require.Len(t, keys, 100, "limit %d: the settled rows still shown, each once", limit)
		want := slices.Clone(keys)
		slices.Sort(want)
		require.Equal(t, 100, len(slices.Compact(want)), "limit %d: no entry twice", limit)
		if limit > 1 {
			require.NotEqual(t, want, keys, "limit %d: out of due order within the lag", limit)
		}
	}
	require.Positive(t, lag.Counts().Reordered)
}

// The index does not know yet that the shard emptied: a stale entry shows
// on an empty page too.
func TestIndexLag_ShowsAStaleEntryOfTheLastRowOfItsShard(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	m := newIndex(t0, 1)
	lag := faults.NewIndexLag(m, 7, maxLag)
	require.Equal(t, []string{"k000"}, query(t, lag, t0, 10))

	require.NoError(t, lag.Done(context.Background(), m.row("k000"), t0))
	require.Equal(t, []string{"k000"}, query(t, lag, t0, 10),
		"the delete has not reached the index: its entry is still shown, as it is when other rows share the shard")
}

// A global secondary index holds the entry of every row whose write reached
// it, whether or not a query read it: a row the wake settles before any
// sweep read it leaves a stale entry too.
func TestIndexLag_ShowsAStaleEntryOfARowSettledBeforeAnyQuery(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	m := newIndex(t0, 3) // staged two hours ago: long in the index
	lag := faults.NewIndexLag(m, 7, maxLag)

	// Settled by a worker that never queried (the wake), then queried.
	require.NoError(t, lag.Done(context.Background(), m.row("k001"), t0))
	require.ElementsMatch(t, []string{"k000", "k001", "k002"}, query(t, lag, t0, 10),
		"the delete has not reached the index: k001's entry (there for two hours) is still shown")
}
