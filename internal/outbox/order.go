package outbox

import (
	"context"
	"sync"
	"time"
)

// DeadHead says what an ordered group does when its head is dead-lettered.
type DeadHead string

// The two dead-head policies.
const (
	// DeadHeadBlock holds the group until an operator redrives the dead
	// head (it goes again, first) or purges it (the group moves on). It is
	// the default: a consumer of an ordered group never sees a gap it
	// cannot detect, and the blocked-group alarm says a person is needed.
	DeadHeadBlock DeadHead = "block"
	// DeadHeadSkip keeps the dead letter and lets the group move on: the
	// consumer sees the group with that row missing.
	DeadHeadSkip DeadHead = "skip"
)

// Valid reports whether d is one of the two policies.
func (d DeadHead) Valid() bool { return d == DeadHeadBlock || d == DeadHeadSkip }

// Link is what the head check reads of one row, with a strongly
// consistent read: whether it exists, its state and its predecessor.
type Link struct {
	Found    bool
	Status   Status
	Attempt  int
	Queue    string
	Prev     string
	FailedAt time.Time
	// Seq is the row's place in its group (0 if it has none), DueAt when
	// it is due.
	Seq   int64
	DueAt time.Time
	// Malformed says why the row's own link cannot be read (a prev or seq
	// of the wrong type), empty if it can. Such a row's place in its group is
	// unknown, so it never lets a successor go, under either policy: its
	// dead letter blocks until an operator purges it.
	Malformed string
}

// gate is what the head check decided for one row.
type gate int

const (
	gateGo      gate = iota // the predecessor is settled: claim
	gateWait                // the predecessor is unsettled: leave the row
	gateParked              // this run holds the predecessor: parked behind it
	gateBlocked             // the predecessor is a dead letter and the route blocks
	gateError               // the check failed: leave the row
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
	// checked under their own route's policy.
	settled map[string]settledRow
	// ready holds parked rows whose predecessor settled, for the next round.
	ready []DueRef
	// oldestBlocked is the earliest failure time of a blocking dead head
	// seen, zero if none; blocked counts them.
	oldestBlocked time.Time
	blocked       map[string]bool
	// links caches each row's predecessor and place as read, for later
	// passes.
	links sync.Map // key -> DueRef
}

// settledRow is a row this run settled for its group.
type settledRow struct {
	seq  int64
	dead bool
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

// release ends this run's hold on key. When the row is settled for its
// group (as: done, or dead under skip) the rows parked behind it are ready
// for the next round. Otherwise (as nil) they, and the rows parked behind
// them, are dropped, for a later sweep to find. It reports whether any
// row was parked behind key.
func (o *order) release(key string, as *settledRow) (any bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.mine[key]; !ok {
		return false
	}
	delete(o.mine, key)
	behind := o.parked[key]
	delete(o.parked, key)
	any = len(behind) > 0
	if as != nil {
		o.settled[key] = *as
		o.ready = append(o.ready, behind...)
		return any
	}
	for len(behind) > 0 {
		ref := behind[0]
		behind = append(behind[1:], o.parked[ref.Key]...)
		delete(o.parked, ref.Key)
		delete(o.mine, ref.Key)
		delete(o.queued, ref.Key)
		o.left[ref.Key] = true
	}
	return any
}

// unheld returns the keys rows are parked behind that the run does not
// hold: pending predecessors it has not been given.
func (o *order) unheld() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys []string
	for key := range o.parked {
		if _, ok := o.mine[key]; !ok {
			keys = append(keys, key)
		}
	}
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

// HeadPolicy is the dead-head policy of the route queue under ordered (the
// routes listed in OUTFLOW_ORDERED, as Policy.Ordered holds them), and
// whether the route is listed. An unlisted route's rows that carry a
// predecessor (a producer ordered them) are held to the default, block.
func HeadPolicy(ordered map[string]DeadHead, queue string) (DeadHead, bool) {
	dh, ok := ordered[queue]
	if !ok {
		return DeadHeadBlock, false
	}
	return dh, true
}

// headPolicy is the engine's HeadPolicy.
func (e *Engine) headPolicy(queue string) (DeadHead, bool) {
	return HeadPolicy(e.policy.Ordered, queue)
}

// DeadLetterBlocks reports whether a dead letter, as l reads it, holds the
// later rows of its ordered group until an operator redrives or purges it,
// under ordered (as HeadPolicy reads it). A row in no group (Seq 0, its
// place readable) has no successor to hold; one whose place cannot be read
// holds its group under either policy. It is the rule the head check
// applies to a row's predecessor, so operators see what the engine does.
func DeadLetterBlocks(ordered map[string]DeadHead, l Link) bool {
	if l.Seq <= 0 && l.Malformed == "" {
		return false
	}
	dh, _ := HeadPolicy(ordered, l.Queue)
	l.Found, l.Status = true, StatusFailed
	return l.Blocks(dh)
}

// Settles reports whether a predecessor in the state l lets its successor
// go, under the dead-head policy dh: it is gone (delivered, or purged),
// done, or a dead letter and dh is skip. A state no writer of Outflow's
// leaves counts as a dead letter: the row cannot go on.
func (l Link) Settles(dh DeadHead) bool {
	if !l.Found || l.Status == StatusDone {
		return true
	}
	if l.Status == StatusPending || l.Status == StatusClaimed || l.Malformed != "" {
		return false
	}
	return dh == DeadHeadSkip
}

// Blocks reports whether a predecessor in the state l holds its successor
// until an operator acts, under the dead-head policy dh: it neither settles
// nor is on its way (pending or claimed), so it is a dead letter, or in a
// state no writer of Outflow's leaves, and dh is block.
func (l Link) Blocks(dh DeadHead) bool {
	return !l.Settles(dh) && l.Status != StatusPending && l.Status != StatusClaimed
}

// settles is the gate for a row of queue whose predecessor is in state l.
func (e *Engine) settles(l Link, queue string) gate {
	dh, _ := e.headPolicy(queue)
	switch {
	case l.Settles(dh):
		return gateGo
	case l.Blocks(dh):
		return gateBlocked
	}
	return gateWait
}

// headCheck decides whether ref, a row of an ordered route, may be
// claimed. It learns the row's predecessor if the ref does not carry it,
// parks the row behind a predecessor this run holds, and otherwise reads
// the predecessor's state with a strongly consistent read.
func (r *run) headCheck(ctx context.Context, ref *DueRef) gate {
	if !ref.Linked {
		if known, ok := r.order.links.Load(ref.Key); ok {
			k := known.(DueRef)
			ref.Prev, ref.Seq, ref.Linked = k.Prev, k.Seq, true
		}
	}
	if !ref.Linked {
		l, err := r.store.Link(ctx, ref.Key)
		if err != nil {
			return r.linkFailed(ctx, ref.Key, err)
		}
		if !l.Found {
			return gateWait // gone since the query: nothing to claim
		}
		ref.Prev, ref.Seq, ref.Linked = l.Prev, l.Seq, true
		r.order.links.Store(ref.Key, DueRef{Prev: l.Prev, Seq: l.Seq}) // they never change
		r.order.learn(ref.Key, l.Seq)
	}
	// A row that names its own key was staged again after that key's row
	// was delivered while it was the group's tail: its predecessor is gone.
	if ref.Prev == "" || ref.Prev == ref.Key {
		return gateGo
	}
	if parked, settled := r.order.park(*ref, false); parked {
		return gateParked
	} else if settled {
		return gateGo
	}
	g, l := r.prevGate(ctx, *ref)
	if g != gateWait || l.Status != StatusPending {
		return g
	}
	// A pending predecessor may be in a page, shard or pass of this run
	// still to come: wait for it here rather than read it again each pass.
	if _, settled := r.order.park(*ref, true); settled {
		return gateGo
	}
	return gateParked
}

// prevGate reads the predecessor of ref and says whether ref may go. On
// the wake's path it waits up to the policy's HeadWait for a predecessor
// in flight elsewhere, so a burst of one group whose rows reached
// different invocations still leaves in about a second.
func (r *run) prevGate(ctx context.Context, ref DueRef) (gate, Link) {
	until := time.Now().Add(r.headWait)
	inFlight := -1 // unknown until the first read says the row waits
	for pause := headPoll; ; pause = min(2*pause, maxHeadPoll) {
		l, err := r.store.Link(ctx, ref.Prev)
		if err != nil {
			return r.linkFailed(ctx, ref.Prev, err), l
		}
		if l.Found && l.Malformed == "" && !before(l.Seq, ref.Seq) {
			// The key was delivered and staged again, in another place:
			// the row it names is gone.
			l = Link{}
		}
		g := r.settles(l, ref.Queue)
		if g == gateBlocked {
			r.order.noteBlocked(ref.Prev, l.FailedAt)
		}
		if g != gateWait || r.headWait <= 0 || time.Now().Add(pause).After(until) || r.pastDeadline() {
			return g, l
		}
		if inFlight < 0 {
			inFlight = 0
			if r.mayMove(ctx, l, ref.Queue) {
				inFlight = 1
			}
		}
		if inFlight == 0 {
			return g, l
		}
		// A claimer waiting here is not a claim on its way: the batcher
		// need not hold other rows' batches for it.
		r.claiming.Add(-1)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		r.claiming.Add(1)
		if ctx.Err() != nil {
			return gateError, l
		}
	}
}

// mayMove reports whether a predecessor the wake would wait for is in
// flight elsewhere: claimed, or pending, never tried, due, and not itself
// held behind a dead letter (one more read, on the wake's path only). A
// row that is not due, or blocked, will not move within any HeadWait.
func (r *run) mayMove(ctx context.Context, l Link, queue string) bool {
	if l.Status == StatusClaimed {
		return true
	}
	if !r.fresh(l) {
		return false
	}
	if l.Prev == "" {
		return true
	}
	prev, err := r.store.Link(ctx, l.Prev)
	if err != nil {
		return false
	}
	dh, _ := r.headPolicy(queue)
	return prev.Settles(dh) || prev.Status == StatusClaimed || r.fresh(prev)
}

// fresh reports whether l is a row pending, never tried and due: on its
// way in some invocation, unless what is before it holds it.
func (r *run) fresh(l Link) bool {
	return l.Status == StatusPending && l.Attempt == 0 && !l.DueAt.After(r.now())
}

// The wake polls a predecessor in flight from headPoll apart, doubling to
// maxHeadPoll: a send and its settle take tens of milliseconds.
const (
	headPoll    = 25 * time.Millisecond
	maxHeadPoll = 400 * time.Millisecond
)

// headAfterClaim checks a claimed row whose predecessor only the claim
// revealed: a producer ordered it, but its route is not listed as ordered,
// or the wake's stream image named another predecessor (a key staged
// again after delivery, say). Order still holds, at the price of the
// claim: if the predecessor is not settled, the claim is released unsent,
// and the row parks behind the predecessor if this run holds it, or waits
// for a later sweep.
func (r *run) headAfterClaim(ctx context.Context, row Row, listed bool) bool {
	ref := DueRef{Key: row.Key, Queue: row.Queue, Prev: row.Prev, Seq: row.Seq, Linked: true}
	settled, mine := r.order.state(ref)
	if settled || row.Prev == row.Key {
		return true // see headCheck: a row naming its own key follows a delivered row
	}
	g := gateWait
	if !mine {
		if g, _ = r.prevGate(ctx, ref); g == gateGo {
			return true
		}
	}
	if !listed {
		r.log.WarnContext(ctx, "row has a predecessor but its route is not listed as ordered: each check costs a claim; list the route in OUTFLOW_ORDERED",
			"key", row.Key, "queue", row.Queue)
	}
	r.count(ctx, "release", row.Key, r.store.Release(ctx, row), nil)
	r.budget.Add(1) // a claim released unsent delivers nothing
	// Not again in this run, unless its predecessor is delivered in it:
	// each try costs a claim and a release, and a sweep that claims
	// something runs another pass.
	r.held.Store(row.Key, forever)
	if mine && r.order.parkOrReady(ref) {
		return false
	}
	if g == gateWait {
		r.order.leave(row.Key)
	}
	r.settledFor(row, false, false)
	return false
}

// forever is a hold that outlasts any run.
var forever = time.Unix(1<<62, 0)

// settledFor ends the run's hold on a row after its settle: ok when the
// row no longer holds its group (delivered, or dead under skip: dead). A
// dead letter that holds rows parked behind it blocks their group.
func (r *run) settledFor(row Row, ok, dead bool) {
	var as *settledRow
	if ok {
		as = &settledRow{seq: row.Seq, dead: dead}
	}
	if behind := r.order.release(row.Key, as); behind && dead && !ok {
		r.order.noteBlocked(row.Key, r.now())
	}
}

// deadSettles reports whether a dead letter of this row lets its group go:
// under skip, unless the row is malformed (its place may be unknown; a
// later sweep reads its link and decides).
func (r *run) deadSettles(row Row) bool {
	dh, _ := r.headPolicy(row.Queue)
	return row.Malformed == "" && Link{Found: true, Status: StatusFailed, Queue: row.Queue}.Settles(dh)
}

// recheck reads, after a pass, each predecessor the run parked rows behind
// without holding it, and sends the rows behind one that has moved on
// (delivered by another worker, dead, or its key staged again) to the next
// round, so they do not wait out the sweep for a row it is never given.
func (r *run) recheck(ctx context.Context) {
	for _, key := range r.order.unheld() {
		if ctx.Err() != nil || r.pastDeadline() {
			return
		}
		l, err := r.store.Link(ctx, key)
		if err != nil {
			r.linkFailed(ctx, key, err)
			continue
		}
		waits := l.Malformed == "" && (l.Status == StatusPending || l.Status == StatusClaimed)
		r.order.requeue(key, func(ref DueRef) bool { return !waits || !before(l.Seq, ref.Seq) })
	}
}

// nextInGroups runs further rounds for the rows parked behind rows this
// run delivered, until none are ready or the run must stop.
func (r *run) nextInGroups(ctx context.Context) {
	for {
		refs := r.order.takeReady()
		if len(refs) == 0 {
			return
		}
		if ctx.Err() != nil || r.budgetSpent() || r.pastDeadline() {
			for _, ref := range refs {
				r.order.leave(ref.Key)
			}
			return
		}
		for _, ref := range refs {
			r.held.Delete(ref.Key) // a row released unsent to wait for its predecessor
		}
		r.pass(ctx, r.emit(refs))
	}
}

// emit is a pass source that hands on refs, in order, holding them all
// first, so a row behind another of them parks rather than waits.
func (r *run) emit(refs []DueRef) func(context.Context, chan<- DueRef) {
	return func(ctx context.Context, out chan<- DueRef) {
		for _, ref := range refs {
			r.order.hold(ref)
		}
		for _, ref := range refs {
			select {
			case out <- ref:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (r *run) linkFailed(ctx context.Context, key string, err error) gate {
	if ctx.Err() == nil {
		r.t.errors.Add(1)
		r.log.WarnContext(ctx, "ordered-group check failed", "key", key, "error", err)
	}
	return gateError
}
