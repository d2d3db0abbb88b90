package outbox

import (
	"context"
	"errors"
	"time"
)

// gate is what the head check decided for one row.
type gate int

const (
	gateGo      gate = iota // the predecessor is settled: claim
	gateWait                // the predecessor is unsettled: leave the row
	gateParked              // this run holds the predecessor: parked behind it
	gateBlocked             // the predecessor is a dead letter and the route blocks
	gateError               // the check failed: leave the row
)

// headPolicy is the engine's HeadPolicy.
func (e *Engine) headPolicy(queue string) (DeadHead, bool) {
	return HeadPolicy(e.policy.Ordered, queue)
}

// settles is the gate for a row of queue whose predecessor is in state l
// at the run's now: a dead head under skip whose last attempt ended unsure
// lets it go only once UnsureWait has passed since it failed.
func (r *run) settles(l Link, queue string) gate {
	dh, _ := r.headPolicy(queue)
	switch {
	case l.SettlesAt(dh, r.now(), r.policy.UnsureWait()):
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
		r.age(ref.Key, agedLink)
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
		if dh, _ := r.headPolicy(ref.Queue); l.Unclosed(dh) {
			g := r.closePlace(ctx, ref.Prev, l)
			l.Status = StatusPending // on its way, as its closing message
			return g, l
		}
		g := r.settles(l, ref.Queue)
		if g == gateBlocked {
			r.order.noteBlocked(ref.Prev, l.FailedAt)
		}
		if g != gateWait || r.headWait <= 0 || time.Now().Add(pause).After(until) || r.pastClaimStop() {
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
	r.holdRow(row.Key, hold{until: forever})
	if mine && r.order.parkOrReady(ref) {
		return false
	}
	if g == gateWait {
		r.order.leave(row.Key)
	}
	r.settledFor(row, false, false)
	return false
}

// settledFor ends the run's hold on a row after its settle: ok when the
// row no longer holds its group (delivered, or dead under skip: dead). A
// dead letter that holds rows parked behind it blocks their group.
func (r *run) settledFor(row Row, ok, dead bool) {
	if ok {
		s := settledRow{seq: row.Seq, dead: dead, page: r.page()}
		if r.order.settle(row, s, r.mayLead(row)) {
			r.age(row.Key, agedSettled)
		}
		return
	}
	if behind := r.order.release(row.Key); behind && dead {
		r.order.noteBlocked(row.Key, r.now())
	}
}

// mayLead reports whether a successor may name row as its predecessor: it
// has a place in an ordered group, or is on a route listed as ordered (a
// producer in another language may leave a group's first row without a
// place). Another row (no place, unlisted route) is in no ordered group:
// the run need not remember it as settled.
func (r *run) mayLead(row Row) bool {
	_, listed := r.headPolicy(row.Queue)
	return row.Seq > 0 || row.Prev != "" || listed
}

// closes reports whether a row about to be dead-lettered first goes back
// to pending as the message that closes its place: a row with a place in
// an ordered group of a FIFO route listed under skip, whose group goes
// past it, so its consumer learns the place will not come. Under block
// its group waits for an operator, whose purge closes the place. A row
// already closing, or malformed, is dead-lettered as it is.
func (r *run) closes(row Row) bool {
	dh, listed := r.headPolicy(row.Queue)
	return listed && dh == DeadHeadSkip && row.Seq > 0 && row.Group != "" && FIFORoute(row.Queue) &&
		row.Closed == "" && row.Malformed == "" && !row.Unclaimed
}

// closePlace sends a dead letter that was never closed (Link.Unclosed:
// dead-lettered under block, or while its route was not listed, and now
// under skip) back to pending as the message that closes its place, as
// the skip path does at dead-lettering: Store.Close of the failed row, due
// once no unsure send of it can land, its history kept. The successor that
// read it waits (gateWait) and follows the closing message, which a sweep
// sends and settles as the dead letter it was; a redrive or purge that
// came first wins, and the successor reads the row again. A row too large
// to close stays the dead letter it was, and its group goes past it with a
// gap, as for any row too large to close (gateGo).
func (r *run) closePlace(ctx context.Context, key string, l Link) gate {
	row := Row{Key: key, Queue: l.Queue, Group: l.Group, Seq: l.Seq, Prev: l.Prev, Status: StatusFailed, FailedAt: l.FailedAt, UnsureAt: l.UnsureAt}
	due := r.now()
	if !l.UnsureAt.IsZero() && l.UnsureAt.Add(r.policy.UnsureWait()).After(due) {
		due = l.UnsureAt.Add(r.policy.UnsureWait())
	}
	r.log.InfoContext(ctx, "closing the place of a dead letter that no message closed, before its successor goes (its route is now under skip)",
		"key", key, "queue", l.Queue, "group", l.Group, "seq", l.Seq, "closed_at", due)
	err := r.store.Close(ctx, row, due, nil)
	var conflict *ConflictError
	switch {
	case err == nil:
		return gateWait
	case errors.Is(err, ErrDeadLettered):
		r.log.WarnContext(ctx, "dead letter too large to close: its group goes past it with a gap", "key", key, "error", err)
		return gateGo
	case errors.As(err, &conflict):
		r.t.conflicts.Add(1)
		return gateWait // redriven or purged since the read: read again later
	}
	return r.linkFailed(ctx, key, err)
}

// deadLink is the link of row as a dead letter.
func deadLink(row Row) Link {
	return Link{Found: true, Status: StatusFailed, Queue: row.Queue, Group: row.Group, Seq: row.Seq, Prev: row.Prev, Malformed: row.Malformed, UnsureAt: row.UnsureAt, Closed: row.Closed}
}

// deadSettles reports whether a dead letter of this row lets its group go
// now: under skip, once no unsure send of it can land, unless the row is
// malformed (its place may be unknown; a later sweep reads its link and
// decides).
func (r *run) deadSettles(row Row) bool {
	dh, _ := r.headPolicy(row.Queue)
	return deadLink(row).SettlesAt(dh, r.now(), r.policy.UnsureWait())
}

// deadWaits reports whether a dead letter of row holds its group only
// until its unsure sends can no longer land (see Policy.UnsureWait): the
// rows behind it are left for a later run, not blocked.
func (r *run) deadWaits(row Row) bool {
	dh, _ := r.headPolicy(row.Queue)
	return deadLink(row).waitsOut(dh)
}

// deadHolds reports whether a dead letter of row holds the rows parked
// behind it until an operator acts: it neither waits out its unsure sends
// nor waits for a later check to close its place (Link.Unclosed: a row
// the store dead-lettered rather than closed, too large to).
func (r *run) deadHolds(row Row) bool {
	dh, _ := r.headPolicy(row.Queue)
	return !r.deadWaits(row) && !deadLink(row).Unclosed(dh)
}

// recheck reads, after a pass, each predecessor the run parked rows behind
// without holding it, and sends the rows behind one that has moved on
// (delivered by another worker, dead, or its key staged again) to the next
// round, so they do not wait out the sweep for a row it is never given.
func (r *run) recheck(ctx context.Context) {
	for _, key := range r.order.unheld() {
		if ctx.Err() != nil || r.pastClaimStop() {
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
		if ctx.Err() != nil || r.budgetSpent() || r.pastClaimStop() {
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
func (r *run) emit(refs []DueRef) source {
	return func(ctx context.Context, give func(DueRef) bool) {
		for _, ref := range refs {
			r.order.hold(ref)
		}
		for i, ref := range refs {
			// A round hands on rows as a query does: they count as pages
			// (see ages).
			if i%r.policy.PageSize == 0 {
				r.paged()
			}
			if !give(ref) {
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
