package outbox

import (
	"maps"
	"math"
	"sync"
	"time"
)

// hold is a run's reason to leave a row alone until a time: another
// worker's lease, the wake's grace, a predecessor it waits for, or the
// row's own settle. A due index lags, as any global secondary index does,
// so a later pass may be given the entry of a row the run already settled,
// or whose claim was refused: a claim of it would be refused again, a
// write billed for nothing.
type hold struct {
	until time.Time
	// row, when set, is the created_at of the row held: a row of the key
	// staged again is another row, and is not held for it.
	row time.Time
	// movedOn says the row no longer holds its group's place: the run
	// settled it, or a refused claim showed it gone, settled or dead. Rows
	// parked behind it are checked again, not left for a later run.
	movedOn bool
}

// covers reports whether h holds ref at now.
func (h hold) covers(ref DueRef, now time.Time) bool {
	return now.Before(h.until) && (h.row.IsZero() || ref.CreatedAt.IsZero() || ref.CreatedAt.Equal(h.row))
}

// forLag reports whether h only spares the run a refused claim of a due
// index entry that lags: the row has moved on (settled, by this run or
// another worker, or gone), or this run retried it (h names the row and
// ends when it is due again, and until then only a stale entry of it can
// be returned). The run keeps such a hold for the pages a lagging index
// may still return the entry in (see ages), not for the run. Other holds
// (another worker's lease, the wake's grace, a row left to wait for its
// group's head) cover rows the live index returns in every pass: they are
// kept until they end.
func (h hold) forLag() bool { return h.movedOn || !h.row.IsZero() }

// holds is a run's holds by key. Maps under a lock rather than a
// sync.Map: a sweep keeps thousands at once, and each is then a map slot,
// not a boxed value behind a node. The holds of rows that moved on, most
// of them, are kept apart in two words each.
type holds struct {
	mu sync.Mutex
	m  map[string]heldAt
	// moved holds the rows that moved on (see settledHold), by key.
	moved map[string]movedAt
}

// heldAt is a hold and the run's page when it was made (see ages).
type heldAt struct {
	hold
	page int64
}

// movedAt is settledHold(row) and the run's page when it was made, in two
// words: row as Unix nanoseconds, noRow for none.
type movedAt struct {
	row  int64
	page int64
}

// noRow is movedAt.row for a hold on no row in particular.
const noRow = math.MinInt64

// moved returns h as a movedAt, if it is a settledHold whose row fits in
// Unix nanoseconds exactly.
func (h heldAt) moved() (movedAt, bool) {
	if !h.movedOn || h.until != forever {
		return movedAt{}, false
	}
	if h.row.IsZero() {
		return movedAt{row: noRow, page: h.page}, true
	}
	ns := h.row.UnixNano()
	return movedAt{row: ns, page: h.page}, ns != noRow && time.Unix(0, ns).Equal(h.row)
}

// hold is the settledHold m stands for.
func (m movedAt) hold() hold {
	if m.row == noRow {
		return settledHold(time.Time{})
	}
	return settledHold(time.Unix(0, m.row))
}

func (hs *holds) store(key string, h heldAt) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if m, ok := h.moved(); ok {
		delete(hs.m, key)
		if hs.moved == nil {
			hs.moved = map[string]movedAt{}
		}
		hs.moved[key] = m
		return
	}
	delete(hs.moved, key)
	if hs.m == nil {
		hs.m = map[string]heldAt{}
	}
	hs.m[key] = h
}

func (hs *holds) load(key string) (heldAt, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if m, ok := hs.moved[key]; ok {
		return heldAt{hold: m.hold(), page: m.page}, true
	}
	h, ok := hs.m[key]
	return h, ok
}

// Delete drops key's hold.
func (hs *holds) Delete(key string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.m, key)
	delete(hs.moved, key)
}

// dropAged drops key's hold if it is for a lagging index and was made by
// page: a later one is dropped by its own aged.
func (hs *holds) dropAged(key string, page int64) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if m, ok := hs.moved[key]; ok && m.page <= page {
		delete(hs.moved, key)
	}
	if h, ok := hs.m[key]; ok && h.forLag() && h.page <= page {
		delete(hs.m, key)
	}
}

// dropEnded drops the holds that have ended by now: they cover nothing.
// A row that moved on is held for ever.
func (hs *holds) dropEnded(now time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	maps.DeleteFunc(hs.m, func(_ string, h heldAt) bool { return !now.Before(h.until) })
}

// len counts the holds.
func (hs *holds) len() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.m) + len(hs.moved)
}

// holdRow holds key as h says.
func (r *run) holdRow(key string, h hold) {
	r.held.store(key, heldAt{hold: h, page: r.page()})
	if h.forLag() {
		r.age(key, agedHold)
	}
}

// heldFor returns the run's hold on ref, if one covers it at now.
func (r *run) heldFor(ref DueRef, now time.Time) (hold, bool) {
	h, ok := r.held.load(ref.Key)
	if !ok {
		return hold{}, false
	}
	return h.hold, h.covers(ref, now)
}

// settledHold is the hold on a row this run settled, or found gone,
// settled or dead: for the rest of the run.
func settledHold(created time.Time) hold {
	return hold{until: forever, row: created, movedOn: true}
}

// holdAfterConflict says how long to leave alone the row of ref whose
// claim was refused, as current shows it (nil: gone): a claim before then
// would be refused again. Gone, settled or dead, for the run; under
// another worker's lease, until the lease ends; due again later, until
// then. A pending due row was lost to a race, and is not held.
func holdAfterConflict(current *Row, ref DueRef, now time.Time) (hold, bool) {
	switch {
	case current == nil || current.Status == StatusDone || current.Status == StatusFailed:
		return settledHold(ref.CreatedAt), true
	case current.Status == StatusClaimed:
		return hold{until: current.LeaseUntil}, true
	case current.DueAt.After(now):
		return hold{until: current.DueAt}, true
	}
	return hold{}, false
}

// forever is a hold that outlasts any run.
var forever = time.Unix(1<<62, 0)
