package faults

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// IndexLag wraps a store so that its due-index queries behave as a global
// secondary index of real DynamoDB does: eventually consistent. Each write
// reaches the index some time after the table, up to Max later, a time
// drawn per key and write from the seed. Until then a query
//   - still returns the entry a settled row had (done, dead-lettered) and
//     the old entry of a row due again (retried): stale entries;
//   - does not return the entry of a row staged (by its created_at) or due
//     again within its lag: missing entries;
//   - returns entries whose due times lie within Max of each other in a
//     disturbed order.
//
// It sees only the writes made through it, and the staging time each entry
// carries, which is all the engine's sweep needs. The wake's stream and the
// store's strongly consistent reads (Claim, Link) are not affected, as in
// DynamoDB.
type IndexLag struct {
	outbox.Store
	seed uint64
	max  time.Duration

	mu     sync.Mutex
	seen   map[string]outbox.DueRef // the last entry a query returned, by key
	stale  map[string]staleEntry    // entries still shown after a write moved or removed them
	hidden map[string]time.Time     // rows due again: their new entry appears then
	writes map[string]int           // writes per key, so each draws its own lag
	met    LagCounts
}

// staleEntry is an index entry a write has moved or removed, which queries
// still return until the write reaches the index.
type staleEntry struct {
	ref   outbox.DueRef
	until time.Time
}

// LagCounts says what queries met under an IndexLag.
type LagCounts struct {
	// Stale counts entries returned after the write that moved or removed
	// them (a settled row's, a retried row's old due time).
	Stale int
	// Missing counts entries left out because their row was staged, or
	// made due again, within its lag.
	Missing int
	// Reordered counts pages returned out of due order.
	Reordered int
}

// String reports the counts for a soak report.
func (c LagCounts) String() string {
	return fmt.Sprintf("stale entries met %d, entries missing %d, pages reordered %d", c.Stale, c.Missing, c.Reordered)
}

// NewIndexLag wraps store with index lag of up to max, drawn from seed.
func NewIndexLag(store outbox.Store, seed uint64, max time.Duration) *IndexLag {
	return &IndexLag{Store: store, seed: seed, max: max, seen: map[string]outbox.DueRef{}, stale: map[string]staleEntry{},
		hidden: map[string]time.Time{}, writes: map[string]int{}}
}

// Counts returns what the queries met so far.
func (l *IndexLag) Counts() LagCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.met
}

// lagOf is how long the write n of key takes to reach the index: a pure
// function of the seed, so a soak replays.
func (l *IndexLag) lagOf(key string, n int) time.Duration {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|index lag|%s|%d", l.seed, key, n)
	return time.Duration(unit(h.Sum64()) * float64(l.max))
}

// lagCursor is the cursor IndexLag puts on a page's last entry: where the
// wrapped store's page ended, which the entries shown need not say.
type lagCursor struct {
	real *outbox.DueRef
}

// position orders index entries as the due index sorts them.
func position(a, b outbox.DueRef) int {
	return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.Key, b.Key))
}

// QueryDue implements outbox.Store: the wrapped store's page, as the
// lagging index shows it.
func (l *IndexLag) QueryDue(ctx context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	if after != nil {
		if c, ok := after.Cursor.(lagCursor); ok {
			after = c.real
		}
	}
	for {
		refs, more, err := l.Store.QueryDue(ctx, shard, now, after, limit)
		if err != nil {
			return refs, more, err
		}
		// An empty page still shows the stale entries past after: the
		// index does not know yet that the shard emptied.
		page := l.show(shard, now, after, refs, more)
		if !more || len(refs) == 0 {
			return page, false, nil
		}
		last := refs[len(refs)-1]
		if len(page) == 0 {
			after = &last // every entry is yet to reach the index: read on
			continue
		}
		page[len(page)-1].Cursor = lagCursor{real: &last}
		return page, true, nil
	}
}

// show turns one page of the wrapped store into the lagging index's: the
// entries not yet there left out, the stale ones in the page's range
// added, the order disturbed within the lag.
func (l *IndexLag) show(shard int, now time.Time, after *outbox.DueRef, refs []outbox.DueRef, more bool) []outbox.DueRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	inPage := make(map[string]bool, len(refs))
	page := make([]outbox.DueRef, 0, len(refs))
	for _, ref := range refs {
		seen := ref
		seen.Cursor = nil
		l.seen[ref.Key] = seen
		if l.missing(ref, now) {
			l.met.Missing++
			continue
		}
		inPage[ref.Key] = true
		page = append(page, ref)
	}
	for key, s := range l.stale {
		switch {
		case !now.Before(s.until):
			delete(l.stale, key)
		case s.ref.Shard != shard || s.ref.DueAt.After(now) || inPage[key]:
		case after != nil && position(s.ref, *after) <= 0:
		case more && position(s.ref, refs[len(refs)-1]) > 0:
		default:
			l.met.Stale++
			page = append(page, s.ref)
		}
	}
	slices.SortFunc(page, position)
	// Entries whose due times lie within the lag of each other may come
	// in either order: a later write reached the index first. Each
	// neighbouring pair is swapped or not as the seed says.
	swapped := false
	for i := 1; i < len(page); i++ {
		if page[i].DueAt.Sub(page[i-1].DueAt) < l.max && l.lagOf(page[i-1].Key+" before "+page[i].Key, 0) < l.max/2 {
			page[i-1], page[i] = page[i], page[i-1]
			swapped = true
		}
	}
	if swapped {
		l.met.Reordered++
	}
	return page
}

// missing reports whether ref's entry has not reached the index yet: its
// row was staged, or made due again, within its lag. The caller holds mu.
func (l *IndexLag) missing(ref outbox.DueRef, now time.Time) bool {
	if until, ok := l.hidden[ref.Key]; ok {
		if now.Before(until) {
			return true
		}
		delete(l.hidden, ref.Key)
	}
	return !ref.CreatedAt.IsZero() && now.Sub(ref.CreatedAt) < l.lagOf(ref.Key, 0)
}

// wrote records a write to key at now that reaches the index only after
// its lag: the entry last seen stays shown until then and, if the row is
// due again (moved), its new entry is missing until then.
func (l *IndexLag) wrote(row outbox.Row, now time.Time, moved bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := row.Key
	l.writes[key]++
	until := now.Add(l.lagOf(key, l.writes[key]))
	ref, ok := l.seen[key]
	if !ok || !ref.CreatedAt.Equal(row.CreatedAt) {
		// The index held the row's entry whether or not a query read it.
		ref = outbox.DueRef{Key: key, Shard: l.shardOf(row), DueAt: row.DueAt, CreatedAt: row.CreatedAt, Queue: row.Queue,
			Prev: row.Prev, Seq: row.Seq, Linked: true}
	}
	l.stale[key] = staleEntry{ref: ref, until: until}
	if moved {
		l.hidden[key] = until
	}
}

// shardOf is the due-index shard of row, as the producer chose it.
func (l *IndexLag) shardOf(row outbox.Row) int {
	n, err := strconv.Atoi(dynamo.ShardFor(row, l.Shards()))
	if err != nil {
		return -1
	}
	return n
}

// Done implements outbox.Store.
func (l *IndexLag) Done(ctx context.Context, row outbox.Row, now time.Time) error {
	err := l.Store.Done(ctx, row, now)
	if err == nil {
		l.wrote(row, now, false)
	}
	return err
}

// Retry implements outbox.Store.
func (l *IndexLag) Retry(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	err := l.Store.Retry(ctx, row, dueAt, history)
	if err == nil {
		// The retry's own time is not passed down; the attempt's last
		// error carries it.
		l.wrote(row, lastErrorAt(history, dueAt), true)
	}
	return err
}

// Close implements outbox.Store.
func (l *IndexLag) Close(ctx context.Context, row outbox.Row, dueAt time.Time, history []outbox.AttemptError) error {
	err := l.Store.Close(ctx, row, dueAt, history)
	if err == nil {
		l.wrote(row, lastErrorAt(history, dueAt), true)
	}
	return err
}

// DeadLetter implements outbox.Store.
func (l *IndexLag) DeadLetter(ctx context.Context, row outbox.Row, now time.Time, history []outbox.AttemptError) error {
	err := l.Store.DeadLetter(ctx, row, now, history)
	if err == nil {
		l.wrote(row, now, false)
	}
	return err
}

// Expire implements outbox.Store.
func (l *IndexLag) Expire(ctx context.Context, row outbox.Row, now time.Time, maxAttempts int, history []outbox.AttemptError) error {
	err := l.Store.Expire(ctx, row, now, maxAttempts, history)
	if err == nil {
		l.wrote(row, now, false)
	}
	return err
}

// Quarantine implements outbox.Store.
func (l *IndexLag) Quarantine(ctx context.Context, key string, now time.Time, reason string) error {
	err := l.Store.Quarantine(ctx, key, now, reason)
	if err == nil {
		l.mu.Lock()
		seen, ok := l.seen[key]
		l.mu.Unlock()
		if ok { // an unreadable item: only a query knows its entry
			l.wrote(outbox.Row{Key: key, Queue: seen.Queue, DueAt: seen.DueAt, CreatedAt: seen.CreatedAt, Prev: seen.Prev, Seq: seen.Seq}, now, false)
		}
	}
	return err
}

// lastErrorAt is the time of the newest error in history, or def.
func lastErrorAt(history []outbox.AttemptError, def time.Time) time.Time {
	if len(history) == 0 {
		return def
	}
	return history[len(history)-1].At
}
