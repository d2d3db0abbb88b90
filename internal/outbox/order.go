package outbox

import (
	"slices"
	"sync"
	"time"
)

// order is one run's view of ordered groups: which predecessors it holds
// and has settled, and which rows wait behind them, so a group's next row
// goes in the next round of the same run, without a query or a read.
type order struct {
	mu sync.Mutex
	// mine holds the keys this run has in hand and has not yet settled,
	// with each row's place in its group once known (0 until then).
	mine map[string]int64
	// parked holds, per predecessor, the rows waiting behind it: a key in
	// mine, or a pending row the run may yet be given (a later page, shard
	// or pass); queued holds every key in parked or ready, so a row the
	// run is given again while it waits is not checked twice.
	parked map[string][]DueRef
	queued map[string]bool
	// left holds the rows the run left to wait for a later run, until it
	// hands them on after all.
	left map[string]bool
	// settled holds the rows this run settled for their groups, by key:
	// their place, so a key staged again is not taken for them, and
	// whether they are dead letters (under skip), whose successors are
	// checked under their own route's policy. Only a row a successor may
	// name has one (see settle), and only until that successor is settled
	// or the run's pages have moved on (see ages): without it, the
	// successor's check reads the predecessor instead.
	settled map[string]settledRow
	// ready holds parked rows whose predecessor settled, for the next round.
	ready []DueRef
	// oldestBlocked is the earliest failure time of a blocking dead head
	// seen, zero if none; blocked counts them.
	oldestBlocked time.Time
	blocked       map[string]bool
	// links caches each row's predecessor and place as read, for later
	// pages and passes, until the row is settled or the run's pages have
	// moved on (see ages).
	links sync.Map // key -> DueRef
}

// settledRow is a row this run settled for its group.
type settledRow struct {
	seq  int64
	dead bool
	// page is the run's page when it settled (see ages).
	page int64
}

// lets reports whether a row of place seq may go behind this settled
// predecessor without a read: it is the one the row names (see next), and
// not a dead letter, whose successors are checked under their own policy.
func (s settledRow) lets(seq int64) bool {
	return !s.dead && next(s.seq, seq)
}

// next reports whether the run may take a row of the predecessor's key at
// place prevSeq, which it holds or settled, for the predecessor of the row
// at place seq without a read: the places are consecutive, as Outflow's
// producer stages them, or one is unknown. Otherwise (a key staged again,
// or a gap a producer in another language left) the check reads it.
func next(prevSeq, seq int64) bool {
	return prevSeq <= 0 || seq <= 1 || prevSeq == seq-1
}

// before reports whether the current row of the predecessor's key, at
// place prevSeq, is the predecessor of the row at place seq: it comes
// before it. A key delivered and staged again sits at its group's tail,
// after every row that named it, so a row of that key at or past seq is
// another row, and the one named is gone. Places may have gaps.
func before(prevSeq, seq int64) bool {
	return prevSeq <= 0 || seq <= 1 || prevSeq < seq
}

func newOrder() *order {
	return &order{mine: map[string]int64{}, parked: map[string][]DueRef{}, queued: map[string]bool{}, left: map[string]bool{}, settled: map[string]settledRow{}, blocked: map[string]bool{}}
}

// hold records that this run has ref in hand: its source gave it, and
// until it is settled or let go, rows behind it may park behind it.
func (o *order) hold(ref DueRef) {
	o.mu.Lock()
	o.mine[ref.Key] = ref.Seq
	o.mu.Unlock()
}

// holds reports whether this run holds the row ref names as its
// predecessor: a row of that key, in the place next before ref's (see
// next). The caller holds mu.
func (o *order) holds(ref DueRef) bool {
	seq, ok := o.mine[ref.Prev]
	return ok && next(seq, ref.Seq)
}

// learn records the place of a row this run holds, once read. Rows parked
// behind its key that name another place (an earlier row of the key) go
// back to be checked again: they do not wait for this one.
func (o *order) learn(key string, seq int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.mine[key]; !ok || seq <= 0 {
		return
	}
	o.mine[key] = seq
	var keep []DueRef
	for _, ref := range o.parked[key] {
		if !next(seq, ref.Seq) {
			o.ready = append(o.ready, ref)
			continue
		}
		keep = append(keep, ref)
	}
	if len(keep) == 0 {
		delete(o.parked, key)
	} else {
		o.parked[key] = keep
	}
}

// park puts ref behind its predecessor if this run holds it (or, with
// pending, whatever the run holds), or reports whether this run already
// settled the predecessor. Both are decided under one lock with settle, so
// a row is never parked behind a settled row.
func (o *order) park(ref DueRef, pending bool) (parked, settled bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.settled[ref.Prev]; ok && s.lets(ref.Seq) {
		return false, true
	}
	if o.holds(ref) || pending {
		o.parked[ref.Prev] = append(o.parked[ref.Prev], ref)
		o.queued[ref.Key] = true
		return true, false
	}
	return false, false
}

// leave records that the run left key to wait for a later run.
func (o *order) leave(key string) {
	o.mu.Lock()
	o.left[key] = true
	o.mu.Unlock()
}

// took records that the run handed key on after all.
func (o *order) took(key string) {
	o.mu.Lock()
	delete(o.left, key)
	o.mu.Unlock()
}

// isWaiting reports whether key is parked or ready in this run already.
func (o *order) isWaiting(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queued[key]
}

// waiting counts the rows a run leaves to wait for a later one: those it
// left, and those still parked at its end (behind a pending predecessor
// it was never given, and the rows behind them), each once.
func (o *order) waiting() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.left)
	for _, refs := range o.parked {
		for _, ref := range refs {
			if !o.left[ref.Key] {
				n++
			}
		}
	}
	return n
}

// state reports whether this run settled ref's predecessor, or holds it.
func (o *order) state(ref DueRef) (settled, mine bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.settled[ref.Prev]
	return ok && s.lets(ref.Seq), o.holds(ref)
}

// parkOrReady parks ref behind its predecessor if this run still holds
// it, or makes it ready if the run settled it meanwhile; false if neither.
func (o *order) parkOrReady(ref DueRef) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, settled := o.settled[ref.Prev]
	switch {
	case settled && s.lets(ref.Seq):
		o.ready = append(o.ready, ref)
	case o.holds(ref):
		o.parked[ref.Prev] = append(o.parked[ref.Prev], ref)
	default:
		return false
	}
	o.queued[ref.Key] = true
	return true
}

// release ends this run's hold on key, a row not settled for its group:
// the rows parked behind it, and the rows parked behind them, are dropped,
// for a later sweep to find. It reports whether any row was parked behind
// key.
func (o *order) release(key string) (parked bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.mine[key]; !ok {
		return false
	}
	delete(o.mine, key)
	behind := o.parked[key]
	delete(o.parked, key)
	parked = len(behind) > 0
	for len(behind) > 0 {
		ref := behind[0]
		behind = append(behind[1:], o.parked[ref.Key]...)
		delete(o.parked, ref.Key)
		delete(o.mine, ref.Key)
		delete(o.queued, ref.Key)
		o.left[ref.Key] = true
	}
	return parked
}

// settle ends this run's hold on row, settled for its group as s says
// (done, or dead under skip): the rows parked behind it are ready for the
// next round. The run remembers s, for a successor still to come, only if
// leads: the row may be named by one. The row's own predecessor is
// forgotten: the row was the one successor that could ask for it (see
// lets; a row of unknown place that names it is checked with a read). It
// reports whether s is to age with the run's pages (see ages): it is
// remembered, and no row parked behind it is its successor (see lets). A
// parked successor goes in the next round, after more pages, and forgets
// s when it settles.
func (o *order) settle(row Row, s settledRow, leads bool) (aging bool) {
	o.links.Delete(row.Key) // settled and held: not checked again
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.mine[row.Key]; !ok {
		return false
	}
	delete(o.mine, row.Key)
	behind := o.parked[row.Key]
	o.ready = append(o.ready, behind...)
	delete(o.parked, row.Key)
	if p, ok := o.settled[row.Prev]; ok && row.Prev != row.Key && p.lets(row.Seq) {
		delete(o.settled, row.Prev)
	}
	if leads {
		o.settled[row.Key] = s
	}
	return leads && !slices.ContainsFunc(behind, func(ref DueRef) bool { return s.lets(ref.Seq) })
}

// forget drops the run's memory of key as settled, if it was settled by
// page: a later settle is forgotten by its own aged.
func (o *order) forget(key string, page int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.settled[key]; ok && s.page <= page {
		delete(o.settled, key)
	}
}

// letGo ends this run's hold on key, a row it did not take because it has
// moved on (gone, settled, dead, or settled by this run already, whose
// index entry lags): the rows parked behind it go back to be checked
// again, with a read, instead of being left for a later run.
func (o *order) letGo(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.mine[key]; !ok {
		return
	}
	delete(o.mine, key)
	o.ready = append(o.ready, o.parked[key]...)
	delete(o.parked, key)
}

// unheld returns the keys rows are parked behind that the run does not
// hold: pending predecessors it has not been given, sorted, so the rows
// requeued behind them go in an order the map does not choose.
func (o *order) unheld() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys []string
	for key := range o.parked {
		if _, ok := o.mine[key]; !ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// requeue sends the rows parked behind key that go (by goes) to the next
// round, where they are checked again.
func (o *order) requeue(key string, goes func(DueRef) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keep []DueRef
	for _, ref := range o.parked[key] {
		if goes(ref) {
			o.ready = append(o.ready, ref)
		} else {
			keep = append(keep, ref)
		}
	}
	if len(keep) == 0 {
		delete(o.parked, key)
	} else {
		o.parked[key] = keep
	}
}

// takeReady returns and clears the rows ready for the next round.
func (o *order) takeReady() []DueRef {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.ready
	o.ready = nil
	for _, ref := range r {
		delete(o.queued, ref.Key)
	}
	return r
}

// noteBlocked records a blocking dead head.
func (o *order) noteBlocked(key string, failedAt time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.blocked[key] = true
	if !failedAt.IsZero() && (o.oldestBlocked.IsZero() || failedAt.Before(o.oldestBlocked)) {
		o.oldestBlocked = failedAt
	}
}
