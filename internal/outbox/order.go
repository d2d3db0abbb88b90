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
	// Malformed says why the row's own link cannot be read (a prev of the
	// wrong type), empty if it can. Such a row's place in its group is
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
	// mine holds the keys this run has in hand and has not yet settled.
	mine map[string]bool
	// parked holds, per predecessor, the rows waiting behind it: a key in
	// mine, or a pending row the run may yet be given (a later page, shard
	// or pass); waiting holds every key in parked or ready, so a row the
	// run is given again while it waits is not checked twice.
	parked  map[string][]DueRef
	waiting map[string]bool
	// settled holds keys this run settled so their successors may go.
	settled map[string]bool
	// ready holds parked rows whose predecessor settled, for the next round.
	ready []DueRef
	// oldestBlocked is the earliest failure time of a blocking dead head
	// seen, zero if none; blocked counts them.
	oldestBlocked time.Time
	blocked       map[string]bool
	// prevs caches each row's predecessor as read, for later passes.
	prevs sync.Map
}

func newOrder() *order {
	return &order{mine: map[string]bool{}, parked: map[string][]DueRef{}, waiting: map[string]bool{}, settled: map[string]bool{}, blocked: map[string]bool{}}
}

// hold records that this run has key in hand: its source gave it, and
// until it is settled or let go, rows behind it may park behind it.
func (o *order) hold(key string) {
	o.mu.Lock()
	o.mine[key] = true
	o.mu.Unlock()
}

// park puts ref behind its predecessor if this run holds it (or, with
// pending, whatever the run holds), or reports whether this run already
// settled the predecessor. Both are decided under one lock with settle, so
// a row is never parked behind a settled row.
func (o *order) park(ref DueRef, pending bool) (parked, settled bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.settled[ref.Prev] {
		return false, true
	}
	if o.mine[ref.Prev] || pending {
		o.parked[ref.Prev] = append(o.parked[ref.Prev], ref)
		o.waiting[ref.Key] = true
		return true, false
	}
	return false, false
}

// isWaiting reports whether key is parked or ready in this run already.
func (o *order) isWaiting(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.waiting[key]
}

// stillParked counts the rows parked at the end of a run: behind a pending
// predecessor the run was never given, and the rows behind them.
func (o *order) stillParked() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, refs := range o.parked {
		n += len(refs)
	}
	return n
}

// state reports whether this run settled key, or holds it.
func (o *order) state(key string) (settled, mine bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.settled[key], o.mine[key]
}

// parkOrReady parks ref behind its predecessor if this run still holds
// it, or makes it ready if the run settled it meanwhile; false if neither.
func (o *order) parkOrReady(ref DueRef) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.settled[ref.Prev]:
		o.ready = append(o.ready, ref)
	case o.mine[ref.Prev]:
		o.parked[ref.Prev] = append(o.parked[ref.Prev], ref)
	default:
		return false
	}
	o.waiting[ref.Key] = true
	return true
}

// release ends this run's hold on key. When the row is settled for its
// group (done, or dead under skip) the rows parked behind it are ready for
// the next round. Otherwise they, and the rows parked behind them, are
// dropped, for a later sweep to find; release returns how many.
func (o *order) release(key string, settled bool) (dropped int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.mine[key] {
		return 0
	}
	delete(o.mine, key)
	behind := o.parked[key]
	delete(o.parked, key)
	if settled {
		o.settled[key] = true
		o.ready = append(o.ready, behind...)
		return 0
	}
	for len(behind) > 0 {
		ref := behind[0]
		behind = append(behind[1:], o.parked[ref.Key]...)
		delete(o.parked, ref.Key)
		delete(o.mine, ref.Key)
		delete(o.waiting, ref.Key)
		dropped++
	}
	return dropped
}

// takeReady returns and clears the rows ready for the next round.
func (o *order) takeReady() []DueRef {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.ready
	o.ready = nil
	for _, ref := range r {
		delete(o.waiting, ref.Key)
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

// DeadLetterBlocks reports whether a dead letter of the route queue holds
// the later rows of its ordered group until an operator redrives or purges
// it, under ordered (as HeadPolicy reads it). seq is the row's place in its
// group, 0 for a row in none: such a row has no successor to hold. It is
// the rule the head check applies to a row's predecessor, so operators see
// what the engine does.
func DeadLetterBlocks(ordered map[string]DeadHead, queue string, seq int64) bool {
	if seq <= 0 {
		return false
	}
	dh, _ := HeadPolicy(ordered, queue)
	return Link{Found: true, Status: StatusFailed, Queue: queue}.Blocks(dh)
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
		if prev, ok := r.order.prevs.Load(ref.Key); ok {
			ref.Prev, ref.Linked = prev.(string), true
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
		ref.Prev, ref.Linked = l.Prev, true
		r.order.prevs.Store(ref.Key, l.Prev) // it never changes
	}
	if ref.Prev == "" {
		return gateGo
	}
	if parked, settled := r.order.park(*ref, false); parked {
		return gateParked
	} else if settled {
		return gateGo
	}
	g, l := r.prevGate(ctx, ref.Prev, ref.Queue)
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

// prevGate reads the predecessor prev of a row of queue and says whether
// the row may go. On the wake's path it waits up to the policy's HeadWait
// for a predecessor in flight elsewhere, so a burst of one group whose rows
// reached different invocations still leaves in about a second.
func (r *run) prevGate(ctx context.Context, prev, queue string) (gate, Link) {
	until := time.Now().Add(r.headWait)
	for pause := headPoll; ; pause = min(2*pause, maxHeadPoll) {
		l, err := r.store.Link(ctx, prev)
		if err != nil {
			return r.linkFailed(ctx, prev, err), l
		}
		g := r.settles(l, queue)
		if g == gateBlocked {
			r.order.noteBlocked(prev, l.FailedAt)
		}
		inFlight := l.Status == StatusClaimed || l.Status == StatusPending && l.Attempt == 0
		if g != gateWait || !inFlight || time.Now().Add(pause).After(until) || r.pastDeadline() {
			return g, l
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return gateError, l
		}
	}
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
	settled, mine := r.order.state(row.Prev)
	if settled {
		return true
	}
	g := gateWait
	if !mine {
		if g, _ = r.prevGate(ctx, row.Prev, row.Queue); g == gateGo {
			return true
		}
	}
	if !listed {
		r.log.WarnContext(ctx, "row has a predecessor but its route is not listed as ordered: each check costs a claim; list the route in OUTFLOW_ORDERED",
			"key", row.Key, "queue", row.Queue)
	}
	r.count(ctx, "release", row.Key, r.store.Release(ctx, row), nil)
	// Not again in this run, unless its predecessor is delivered in it:
	// each try costs a claim and a release, and a sweep that claims
	// something runs another pass.
	r.held.Store(row.Key, forever)
	if mine && r.order.parkOrReady(DueRef{Key: row.Key, Queue: row.Queue, Prev: row.Prev, Linked: true}) {
		return false
	}
	if g == gateWait {
		r.t.waiting.Add(1)
	}
	r.settledFor(row, false)
	return false
}

// forever is a hold that outlasts any run.
var forever = time.Unix(1<<62, 0)

// settledFor ends the run's hold on a row after its settle: ok when the
// row no longer holds its group (delivered, or dead under skip).
func (r *run) settledFor(row Row, ok bool) {
	r.t.waiting.Add(int64(r.order.release(row.Key, ok)))
}

// deadSettles reports whether a dead letter of this row lets its group go:
// under skip, unless the row is malformed (its place may be unknown; a
// later sweep reads its link and decides).
func (r *run) deadSettles(row Row) bool {
	dh, _ := r.headPolicy(row.Queue)
	return row.Malformed == "" && Link{Found: true, Status: StatusFailed, Queue: row.Queue}.Settles(dh)
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
			r.t.waiting.Add(int64(len(refs)))
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
			r.order.hold(ref.Key)
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
