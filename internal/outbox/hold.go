package outbox

import "time"

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

// holdRow holds key as h says.
func (r *run) holdRow(key string, h hold) { r.held.Store(key, h) }

// heldFor returns the run's hold on ref, if one covers it at now.
func (r *run) heldFor(ref DueRef, now time.Time) (hold, bool) {
	v, ok := r.held.Load(ref.Key)
	if !ok {
		return hold{}, false
	}
	h := v.(hold)
	return h, h.covers(ref, now)
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
