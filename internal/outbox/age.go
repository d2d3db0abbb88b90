package outbox

import (
	"sync"
	"sync/atomic"
)

// keepRounds is how many rounds of due-index pages (one page of each shard
// a sweep queries) the run keeps what it learned of a row only in case the
// row, or its successor, is given to it again. Within a pass a shard's
// pages move forward, so what a page returns is at most a few pages away
// from the rows the run is settling; a later pass starts again from the
// front, where a lagging index still shows the entries of the rows settled
// last. Two rounds cover both, and keep a sweep's memory bounded by its
// pages (PageSize rows each) rather than by the rows it settles.
const keepRounds = 2

// ages drops, once the run has queried enough pages since, what the run
// kept of a row only to spare a later read or write: a hold that spares a
// refused claim of a lagging index entry (see hold.forLag), a settled
// predecessor its successor may yet ask for without a read, and a link
// read for a later pass. Dropping one costs at most that read or refused
// write, never the order of a group: without it the head check reads the
// predecessor, with a strongly consistent read, and a claim of a row that
// moved on is refused.
type ages struct {
	// pages counts the due-index pages the run has queried, and the
	// pages' worth of rows its rounds have handed on.
	pages atomic.Int64
	// keep is how many pages an entry outlives; 0 keeps entries for the
	// run (a run that queries nothing, the wake's, holds only the rows it
	// was given). Set before the run starts.
	keep int64
	mu   sync.Mutex
	// queue holds the entries to drop, oldest first, from head on.
	queue []aged
	head  int
}

// agedKind says which of the run's maps an aged entry is in.
type agedKind uint8

const (
	agedHold agedKind = iota
	agedSettled
	agedLink
)

// aged is one entry to drop once keep more pages are queried. Each map
// entry carries the page it was made at, so dropping it spares one made
// since, which has an aged of its own.
type aged struct {
	key string
	// at is the page the entry was made at, times four, plus its kind:
	// two words an entry, as a sweep keeps thousands.
	at int64
}

func (a aged) page() int64    { return a.at >> 2 }
func (a aged) kind() agedKind { return agedKind(a.at & 3) }

// page is the run's pages so far, the stamp of an entry made now.
func (r *run) page() int64 { return r.ages.pages.Load() }

// age records that the entry of key in kind's map, made at or before now,
// may be dropped once keep more pages are queried. Call it after the
// entry is stored, so its aged comes after it.
func (r *run) age(key string, kind agedKind) {
	if r.ages.keep == 0 {
		return
	}
	r.ages.mu.Lock()
	defer r.ages.mu.Unlock()
	r.ages.queue = append(r.ages.queue, aged{key: key, at: r.page()<<2 | int64(kind)})
}

// paged counts a page of rows handed on and drops the entries it outlives.
func (r *run) paged() {
	pages := r.ages.pages.Add(1)
	if r.ages.keep == 0 {
		return
	}
	r.ages.mu.Lock()
	defer r.ages.mu.Unlock()
	q := r.ages.queue
	h := r.ages.head
	for ; h < len(q) && q[h].page()+r.ages.keep <= pages; h++ {
		switch a := q[h]; a.kind() {
		case agedHold:
			r.held.dropAged(a.key, a.page())
		case agedSettled:
			r.order.forget(a.key, a.page())
		case agedLink:
			r.order.links.Delete(a.key)
		}
	}
	r.ages.head = h
	// Once half the queue is dropped, move the rest to the front: the
	// queue keeps one array, as long as the most entries kept at once.
	if h > len(q)/2 {
		n := copy(q, q[h:])
		clear(q[n:])
		r.ages.queue, r.ages.head = q[:n], 0
	}
}
