package outbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// sendBatch is the most rows handed to the deliverer at once: SQS's
// SendMessageBatch limit, which is also where per-request cost stops falling.
const sendBatch = 10

// run is the state of one Sweep or DeliverKeys call.
type run struct {
	*Engine
	t      tally
	grace  time.Duration
	start  time.Time
	stopAt time.Time // zero: no deadline
	// claimStop, when set, stops claims (and queries, and the rounds of
	// parked rows) before stopAt: where the next sweep of the same shards
	// begins. Rows already claimed are still sent up to stopAt.
	claimStop time.Time
	budget    atomic.Int64
	// held remembers rows to leave alone until a time (see hold): rows
	// under another worker's live lease or settled, so later passes do not
	// pay for the same refused write again, and rows left to the wake, so
	// they are counted once. A hold that only spares a refused write is
	// kept for the pages that may still return its row (see hold.forLag).
	held holds
	// ages drops the entries of held and order kept only for a later
	// page or pass, once the run has queried enough pages since.
	ages ages
	// oldest is the earliest due time seen, as Unix milliseconds (the unit
	// due_at is stored in, so any stored value fits); noDue if none.
	oldest atomic.Int64
	// querying counts due-index queries in flight, so the batcher knows
	// more rows may be coming.
	querying atomic.Int64
	// order tracks the ordered groups this run touches.
	order *order
	// headWait is how long a head check may wait for a predecessor in
	// flight elsewhere: the policy's HeadWait on the wake's path, else 0.
	headWait time.Duration
	// claiming counts the claims on their way in the current pass, so the
	// batcher knows more rows may be coming.
	claiming atomic.Int64
	// gate adapts a sweep's claims in flight to throttling; nil on the
	// wake's path, whose batch bounds it.
	gate *claimGate
	// claimFree lets the run send fresh unordered rows of the wake's
	// stream images without a claim (see sendUnclaimed): DeliverRefs only.
	claimFree bool
}

func (r *run) pastDeadline() bool {
	return !r.stopAt.IsZero() && !r.now().Before(r.stopAt)
}

// pastClaimStop reports whether the run may claim no more rows: the
// deadline margin is reached, or the next sweep of its shards is near.
func (r *run) pastClaimStop() bool {
	return r.pastDeadline() || (!r.claimStop.IsZero() && !r.now().Before(r.claimStop))
}

func (r *run) budgetSpent() bool { return r.budget.Load() <= 0 }

func (r *run) finish(stopped string) Result {
	res := r.t.result()
	if o := r.oldest.Load(); o != noDue {
		res.OldestDueAge = ageSince(r.start, o)
	}
	res.Waiting = r.order.waiting()
	res.BlockedGroups = len(r.order.blocked)
	if !r.order.oldestBlocked.IsZero() {
		res.OldestBlockedAge = max(0, r.start.Sub(r.order.oldestBlocked))
	}
	if r.gate != nil {
		res.ClaimConcurrency = r.gate.low()
	}
	res.Duration = r.now().Sub(r.start)
	res.Stopped = stopped
	return res
}

// source hands a pass the rows to claim, calling give for each in turn
// until it has no more or give returns false (the pass must stop).
type source func(ctx context.Context, give func(DueRef) bool)

// pass runs the pipeline once over what src gives: claim in parallel,
// batch per queue, send and settle in parallel. It returns when every row it
// claimed is settled, released, or (if ctx ended) left to its lease.
func (r *run) pass(ctx context.Context, src source) {
	if r.serial {
		r.serialPass(ctx, src)
		return
	}
	conc := r.policy.Concurrency
	refs := make(chan DueRef, r.policy.PageSize)
	claimed := make(chan Row, conc)
	batches := make(chan []Row, conc)

	go func() {
		defer close(refs)
		src(ctx, func(ref DueRef) bool {
			select {
			case refs <- ref:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()

	var claimers sync.WaitGroup
	for range conc {
		claimers.Go(func() {
			for ref := range refs {
				r.claiming.Add(1)
				if r.gate == nil {
					r.claim(ctx, ref, claimed)
				} else if r.gate.acquire(ctx) {
					r.claim(ctx, ref, claimed)
					r.gate.release()
				} else {
					r.order.release(ref.Key)
				}
				r.claiming.Add(-1)
			}
		})
	}
	go func() {
		claimers.Wait()
		close(claimed)
	}()

	go func() {
		defer close(batches)
		r.batch(claimed, batches, func() bool { return len(refs) == 0 && r.claiming.Load() == 0 && r.querying.Load() == 0 })
	}()

	var senders sync.WaitGroup
	for range conc {
		senders.Go(func() {
			for b := range batches {
				r.send(ctx, b)
			}
		})
	}
	senders.Wait()
}

// serialPass is pass on the caller's goroutine alone, one request at a
// time in an order that depends on nothing but what the store and the
// deliverer answer (see Engine.serial): it claims the rows src gives one
// after another, and after every Concurrency of them, and at the end,
// sends the rows claimed, a batch per queue in the order the queues were
// first claimed, and settles them in order. A window of Concurrency
// claims stands in for the claims the parallel pipeline makes while a
// batch lingers.
func (r *run) serialPass(ctx context.Context, src source) {
	claimed := make(chan Row, 1) // a claim hands on at most one row
	var window []Row
	given := 0
	flush := func() {
		for len(window) > 0 {
			q := window[0].Queue
			var batch, rest []Row
			for _, row := range window {
				if row.Queue == q && len(batch) < sendBatch {
					batch = append(batch, row)
				} else {
					rest = append(rest, row)
				}
			}
			r.send(ctx, batch)
			window = rest
		}
		given = 0
	}
	src(ctx, func(ref DueRef) bool {
		r.claim(ctx, ref, claimed)
		select {
		case row := <-claimed:
			window = append(window, row)
		default:
		}
		if given++; given == r.policy.Concurrency {
			flush()
		}
		return ctx.Err() == nil
	})
	flush()
}

// queryShards is a source that gives the due rows of the given shards,
// shards in parallel (one after another in a serial run), each paged
// oldest first, until the shard is exhausted or the run must stop.
func (r *run) queryShards(shards []int) source {
	return func(ctx context.Context, give func(DueRef) bool) {
		r.all(len(shards), func(i int) {
			var after *DueRef
			for ctx.Err() == nil && !r.budgetSpent() && !r.pastClaimStop() {
				more, ok := r.queryPage(ctx, shards[i], &after, give)
				if !ok || !more {
					return
				}
			}
		})
	}
}

// queryPage reads one page of a shard and hands its entries on, counting
// itself as in flight until the last is handed over. It advances after,
// and reports whether the shard may hold more and whether to go on.
func (r *run) queryPage(ctx context.Context, shard int, after **DueRef, give func(DueRef) bool) (more, ok bool) {
	r.querying.Add(1)
	defer r.querying.Add(-1)
	refs, more, err := r.store.QueryDue(ctx, shard, r.now(), *after, r.policy.PageSize)
	if err != nil {
		if ctx.Err() == nil {
			r.t.errors.Add(1)
			r.log.WarnContext(ctx, "query due rows failed", "shard", shard, "error", err)
		}
		return false, false
	}
	r.paged()
	if len(refs) == 0 {
		return false, true
	}
	for _, ref := range refs {
		// Not only the first: a lagging index may return a page out of
		// order.
		r.noteDue(ref.DueAt)
		r.order.hold(ref)
		if !give(ref) {
			return false, false
		}
	}
	*after = &refs[len(refs)-1]
	return more, true
}

// noDue is oldest before any due row is seen: no row is due that late.
const noDue = math.MaxInt64

// noteDue records due as the oldest due time seen if it is.
func (r *run) noteDue(due time.Time) {
	n := due.UnixMilli()
	for {
		cur := r.oldest.Load()
		if cur <= n {
			return
		}
		if r.oldest.CompareAndSwap(cur, n) {
			return
		}
	}
}

// ageSince is how long before start the Unix millisecond dueMs was, at
// least 0. It saturates instead of wrapping: a producer may write any
// due_at, and one too far back for a Duration is as overdue as can be.
func ageSince(start time.Time, dueMs int64) time.Duration {
	startMs := start.UnixMilli()
	if dueMs <= startMs-math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return max(0, time.Duration(startMs-dueMs)*time.Millisecond)
}

// claim takes one row and hands it on, or records why it could not. The
// run holds the row for its ordered group from the moment its source gave
// it; unless it is handed on, settled or parked, the hold ends here and
// the rows parked behind it go back to waiting.
func (r *run) claim(ctx context.Context, ref DueRef, out chan<- Row) {
	if !r.claimOne(ctx, ref, out) {
		r.order.release(ref.Key)
	}
}

// claimOne is claim; it reports whether the row was handed on, settled or
// parked.
func (r *run) claimOne(ctx context.Context, ref DueRef, out chan<- Row) bool {
	if ctx.Err() != nil {
		return false
	}
	if r.pastClaimStop() {
		r.leaveUnsent(ctx, ref)
		return false
	}
	now := r.now()
	if h, ok := r.heldFor(ref, now); ok {
		if h.movedOn {
			r.order.letGo(ref.Key)
			return true
		}
		return false
	}
	if r.order.isWaiting(ref.Key) {
		return true // given again by a later pass: it waits already
	}
	if r.youngForWake(ref, now) {
		r.holdRow(ref.Key, hold{until: ref.CreatedAt.Add(r.grace)})
		r.t.skipped.Add(1)
		return false
	}
	_, listed := r.headPolicy(ref.Queue)
	if row, ok := r.sendUnclaimed(ref, listed, now); ok {
		if r.budget.Add(-1) < 0 {
			r.leaveUnsent(ctx, ref)
			return false
		}
		select {
		case out <- row:
			r.t.unclaimed.Add(1)
			r.order.took(row.Key)
			return true
		case <-ctx.Done():
			return false
		}
	}
	checked := false
	if listed || ref.Prev != "" {
		switch r.headCheck(ctx, &ref) {
		case gateGo:
			checked = true
		case gateParked:
			return true
		case gateWait:
			r.order.leave(ref.Key)
			r.leaveUnsent(ctx, ref)
			return false
		case gateBlocked:
			// An operator's redrive or purge is what changes it: not
			// again in this run.
			r.holdRow(ref.Key, hold{until: forever})
			r.order.leave(ref.Key)
			r.leaveUnsent(ctx, ref)
			return false
		case gateError:
			r.leaveUnsent(ctx, ref)
			return false
		}
	}
	if r.budget.Add(-1) < 0 {
		r.leaveUnsent(ctx, ref)
		return false
	}
	// The lease is timed from now, after the head check: its reads and
	// the wake's head wait must not be spent out of it.
	now = r.now()
	row, err := r.store.Claim(ctx, ref.Key, now, r.policy.Lease, r.policy.MaxAttempts)
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		if r.onClaimConflict(ctx, conflict, ref, now) {
			r.order.letGo(ref.Key)
			return true
		}
		// A lean row the claim could not take (not due yet by this
		// clock: a producer's clock ahead of it) is left to the sweep;
		// one another worker wrote refuses the hand-over, as it should.
		r.leaveUnsent(ctx, ref)
		return false
	case errors.Is(err, ErrDeadLettered):
		r.t.deadLettered.Add(1)
		r.log.WarnContext(ctx, "row dead-lettered at claim", "key", ref.Key, "error", err)
		r.holdRow(ref.Key, settledHold(ref.CreatedAt))
		r.order.letGo(ref.Key)
		return true
	case err != nil:
		if IsThrottled(err) {
			r.t.throttled.Add(1)
			NoteThrottle(ctx)
		}
		if ctx.Err() == nil {
			r.t.errors.Add(1)
			r.log.WarnContext(ctx, "claim failed", "key", ref.Key, "error", err)
		}
		r.leaveUnsent(ctx, ref)
		return false
	}
	r.t.claimed.Add(1)
	if row.Malformed != "" {
		r.settle(ctx, row, Permanent(fmt.Errorf("%w: %s", errMalformed, row.Malformed)))
		return true
	}
	if listed && row.Seq == 0 && row.Prev == "" {
		// Staged with no place (a producer that does not list the route
		// as ordered, or another language's): it goes, for nothing is
		// lost by sending it, but in no order, and its consumer applies
		// it unordered. Say so where an operator looks: the log names the
		// row, and UnplacedRowsAlarm fires on the count.
		r.t.unplaced.Add(1)
		r.log.WarnContext(ctx, "row of an ordered route has no place in its group: delivered in no order; list the route as ordered in its producer",
			"key", row.Key, "queue", row.Queue)
	}
	// The check above vouches for the predecessor it read: a wake ref's
	// comes from a stream image, which may be of an earlier row of that key.
	if row.Seq != ref.Seq {
		// The ref was of an earlier row of this key (a stale stream
		// image): rows parked behind it do not wait for this one.
		r.order.learn(row.Key, row.Seq)
	}
	if row.Prev != "" && (!checked || row.Prev != ref.Prev || row.Seq != ref.Seq) && !r.headAfterClaim(ctx, row, listed) {
		return true
	}
	select {
	case out <- row:
		r.order.took(row.Key)
		return true
	case <-ctx.Done():
		return false
	}
}

// sendUnclaimed reports whether the wake may send ref's row without a
// claim, and returns it as sent: its stream image, at attempt 1. Only a
// fresh unordered row qualifies: on the wake's path (claimFree), due when
// inserted, never tried, on a route not listed as ordered and with no
// place in a group, with a stage id (which its settle's condition names,
// so a stale image never settles a later row of the key), and younger
// than the wake grace, so no sweep has
// been allowed to claim it yet. Its settle is then the one write the
// wake makes (see Store.Done): conditioned on the row being still as
// staged, it fails if a sweep claimed it meanwhile. An ordered row keeps
// its claim: the claim's lease fences its send (see mayStart), so no copy
// of it can land after its successor; without one, a slow send could.
func (r *run) sendUnclaimed(ref DueRef, listed bool, now time.Time) (Row, bool) {
	img, grace := ref.Image, r.policy.WakeGrace
	if !r.asStagedImage(ref) || listed || ref.Prev != "" || img.Seq != 0 || img.Prev != "" ||
		grace <= 0 || img.CreatedAt.IsZero() || img.CreatedAt.After(now) || now.Sub(img.CreatedAt) >= grace ||
		img.DueAt.After(img.CreatedAt) {
		return Row{}, false
	}
	if _, ordered := r.headPolicy(img.Queue); ordered {
		return Row{}, false
	}
	row := *img
	row.Attempt, row.Unclaimed = 1, true
	return row, true
}

// youngForWake reports whether the wake should have this row: it was due
// when inserted and is younger than the grace. Retried, released, delayed
// and redriven rows were never the wake's, so the sweep takes them at once.
// So is a row created in the future (a producer's clock or unit is wrong):
// holding it until its created_at plus the grace could hold it for ever.
func (r *run) youngForWake(ref DueRef, now time.Time) bool {
	return r.grace > 0 && !ref.CreatedAt.IsZero() && !ref.CreatedAt.After(now) &&
		now.Sub(ref.CreatedAt) < r.grace && !ref.DueAt.After(ref.CreatedAt)
}

// onClaimConflict acts on a refused claim of ref's row and holds the row
// for as long as the refusal holds. It reports whether the row has moved
// on (the run quarantined or expired it, or it is gone, settled or dead).
func (r *run) onClaimConflict(ctx context.Context, c *ConflictError, ref DueRef, now time.Time) (movedOn bool) {
	switch {
	case c.Malformed != "":
		err := r.store.Quarantine(ctx, c.Key, now, TruncateError(fmt.Sprintf("%s: %s", errMalformed, c.Malformed)))
		r.count(ctx, "quarantine", c.Key, err, &r.t.deadLettered)
		r.holdRow(c.Key, settledHold(ref.CreatedAt))
		return true
	case c.Current != nil && c.Current.expirable(now, r.policy.MaxAttempts):
		cur, reason, unsure := *c.Current, "attempt budget spent", false
		if cur.Status == StatusClaimed {
			// The lapsed claim may have been sent up to its lease's end.
			reason, unsure, cur.UnsureAt = "lease expired on final attempt", true, now
		}
		hist := cur.withError(AttemptError{At: now, Attempt: cur.Attempt, Message: reason, Unsure: unsure})
		if r.closes(cur) {
			return r.closeExpired(ctx, cur, ref, now, hist)
		}
		// A skipped row's closing message was counted when the row was
		// closed: its own lapsed claim is no second dead letter.
		counted := &r.t.expired
		if cur.Closed == ClosedDeadLetter {
			counted = nil
		}
		err := r.store.Expire(ctx, cur, now, r.policy.MaxAttempts, hist)
		r.count(ctx, "expire", c.Key, err, counted)
		r.holdRow(c.Key, settledHold(ref.CreatedAt))
		return true
	}
	r.t.conflicts.Add(1)
	h, ok := holdAfterConflict(c.Current, ref, now)
	if ok {
		r.holdRow(c.Key, h)
	}
	return h.movedOn
}

// closeExpired ends the final attempt of a row of a group that goes past
// its dead letters (skip) as any final failure there ends: its place is
// closed first. A lapsed claim's row goes back to pending as the message
// closing its place, due once no send of the lapsed claim can land
// (Store.Close, under the lapsed claim's own token, which no other worker
// holds: a new claim would have replaced it). Expired instead, its group
// would go past a place that no message closes, and a GapWait consumer
// wait there for ever. A row stranded pending with its budget spent was
// claimed by no one: it is expired with its place marked open
// (ClosedUnsent), which holds its group until a redrive or a purge (which
// sends the closing message), as a closing message that failed does.
func (r *run) closeExpired(ctx context.Context, cur Row, ref DueRef, now time.Time, hist []AttemptError) (movedOn bool) {
	if cur.Status != StatusClaimed {
		// Its closing message was never tried: not sent, for certain;
		// but a row redriven as late may have had its place closed before
		// (PlaceMaybeClosed), and a redrive must not promise its place.
		cur.Closed = ClosedUnsent
		if !cur.PlaceMaybeClosed.IsZero() {
			cur.Closed = ClosedUnsure
		}
		err := r.store.Expire(ctx, cur, now, r.policy.MaxAttempts, hist)
		r.count(ctx, "expire", cur.Key, err, &r.t.expired)
		r.holdRow(cur.Key, settledHold(ref.CreatedAt))
		return true
	}
	due := cur.UnsureAt.Add(r.policy.UnsureWait())
	r.log.InfoContext(ctx, "a final claim lapsed; its place is closed first", "key", cur.Key, "queue", cur.Queue, "attempt", cur.Attempt, "closed_at", due)
	err := r.store.Close(ctx, cur, due, hist)
	r.count(ctx, "close", cur.Key, err, &r.t.expired)
	if errors.Is(err, ErrDeadLettered) {
		// Too large to close: dead-lettered, and its group goes past it
		// with a gap, as before.
		r.holdRow(cur.Key, settledHold(ref.CreatedAt))
		return true
	}
	r.holdRow(cur.Key, hold{until: due, row: ref.CreatedAt})
	return true
}

// doneAnyway reports whether a refused done was this run's own done,
// applied: the row is gone, or kept as done, while the run's claim on it
// is still live. The SDK sends again a done whose answer was lost, and the
// retry is refused so. While the claim is live no other worker can have
// touched the row, so its done is the only explanation, and the rows
// parked behind it go on in this run (on the wake's path there is no later
// pass to find them). Once the lease has lapsed, another worker may have
// claimed the row and dead-lettered it with a send whose outcome is
// unknown, and an operator purged it: the run then leaves the group to a
// later check. A new row of the key, staged since, is pending: neither.
func (r *run) doneAnyway(err error, row Row) bool {
	var c *ConflictError
	return errors.As(err, &c) && c.Malformed == "" && (c.Current == nil || c.Current.Status == StatusDone) &&
		r.now().Before(row.LeaseUntil)
}

// count records the outcome of a settling write: success adds to ok (if any),
// a refused condition is a conflict, anything else an error.
func (r *run) count(ctx context.Context, op, key string, err error, ok *atomic.Int64) {
	var conflict *ConflictError
	switch {
	case err == nil:
		if ok != nil {
			ok.Add(1)
		}
	case errors.Is(err, ErrDeadLettered):
		// The store dead-lettered the row instead: it could not take this
		// write (its item is too large).
		r.t.deadLettered.Add(1)
		r.log.WarnContext(ctx, "row dead-lettered instead", "op", op, "key", key, "error", err)
	case errors.As(err, &conflict):
		r.t.conflicts.Add(1)
		r.log.InfoContext(ctx, "write refused", "op", op, "key", key, "reason", err)
	default:
		r.t.errors.Add(1)
		r.log.WarnContext(ctx, "write failed", "op", op, "key", key, "error", err)
	}
}

// batch groups claimed rows by queue and emits a group when it is full,
// when input ends, when nothing more is on its way (no reference queued and
// no claim in flight), or when its oldest row has waited BatchLinger. So a
// backlog drain sends full batches however slow the claims are, and a lone
// row is not held back.
func (r *run) batch(in <-chan Row, out chan<- []Row, upstreamIdle func() bool) {
	groups := map[string][]Row{}
	since := map[string]time.Time{}
	tick := time.NewTicker(batchCheck)
	defer tick.Stop()
	emit := func(q string) {
		out <- groups[q]
		delete(groups, q)
		delete(since, q)
	}
	for {
		select {
		case row, ok := <-in:
			if !ok {
				for q := range groups {
					emit(q)
				}
				return
			}
			q := row.Queue
			if len(groups[q]) == 0 {
				since[q] = time.Now()
			}
			groups[q] = append(groups[q], row)
			if len(groups[q]) == sendBatch {
				emit(q)
			}
		case <-tick.C:
			idle := upstreamIdle() && len(in) == 0
			for q, t := range since {
				if idle || time.Since(t) >= r.policy.BatchLinger {
					emit(q)
				}
			}
		}
	}
}

// batchCheck is how often the batcher looks for partial batches to send.
const batchCheck = 2 * time.Millisecond

// send delivers one batch and settles every row in it. Rows the run may
// not send (the deadline margin is reached, or the row's lease would end
// before a send call could: see mayStart) are released unsent, and so are
// rows the deliverer left unsent for their lease (ErrLeaseEnding).
func (r *run) send(ctx context.Context, rows []Row) {
	if ctx.Err() != nil {
		return // a crash: the claims stay held until their lease expires
	}
	var sendable []Row
	for _, row := range rows {
		if r.pastDeadline() || !r.mayStart(row) {
			r.release(ctx, row)
			continue
		}
		sendable = append(sendable, row)
	}
	if len(sendable) == 0 {
		return
	}
	errs := r.deliverer.Deliver(WithFence(ctx, r.mayStart), sendable[0].Queue, sendable)
	r.all(len(sendable), func(i int) {
		row, err := sendable[i], errNoResult
		if i < len(errs) {
			err = errs[i]
		}
		if errors.Is(err, ErrLeaseEnding) {
			r.release(ctx, row)
			return
		}
		r.settle(ctx, row, err)
	})
}

// release gives back a claimed row the run did not send, and leaves it
// to a later run: a run slow enough to miss a lease once would claim and
// release it again. A refused release (another worker expired or claimed
// the row once its lease ended) drops it: the run no longer holds it,
// and never sends it.
func (r *run) release(ctx context.Context, row Row) {
	if row.Unclaimed {
		// Nothing to give back: the sweep takes it after the grace, once
		// it is in the due index.
		r.handOver(ctx, row)
		r.holdRow(row.Key, hold{until: forever, row: row.CreatedAt})
		r.settledFor(row, false, false)
		return
	}
	err := r.store.Release(ctx, row)
	r.count(ctx, "release", row.Key, err, &r.t.released)
	r.settleFailed(ctx, row, err)
	r.holdRow(row.Key, hold{until: forever, row: row.CreatedAt})
	r.settledFor(row, false, false)
}

// leaveUnsent is what the wake does with a ref it leaves unsent (no time
// or row budget left, its claim refused or failed): nothing, unless its
// image is a lean row as staged, which no sweep could see; that one it
// hands over, conditioned on the row being still as staged. A canceled
// context is a crash: nothing is written.
func (r *run) leaveUnsent(ctx context.Context, ref DueRef) {
	if ctx.Err() != nil || !r.asStagedImage(ref) || !ref.Image.Unindexed {
		return
	}
	row := *ref.Image
	row.Unclaimed = true
	r.handOver(ctx, row)
}

// asStagedImage reports whether ref, on the wake's path, carries a
// readable stream image of its own row as a producer staged it: pending,
// never tried or claimed, with the stage id a write conditioned on it
// (asStaged, in the store) names. Both the claim-free send and the
// hand-over of a row left unsent write on that condition.
func (r *run) asStagedImage(ref DueRef) bool {
	img := ref.Image
	return r.claimFree && img != nil && img.Key == ref.Key && img.Malformed == "" &&
		img.Status == StatusPending && img.Attempt == 0 && img.Token == "" && img.StageID != ""
}

// handOver puts an unindexed row the run sent (claimed or not), or left
// unsent, into the due index, where the sweep's retries, backoff and dead letters
// apply: a lean row no settle moved is seen by no sweep, only by the
// backstop's scan, much later. One write, as staged (Store.Index); a
// refusal means another worker wrote the row, which is then theirs.
func (r *run) handOver(ctx context.Context, row Row) {
	if !row.Unindexed || ctx.Err() != nil {
		return
	}
	err := r.settleWrite(ctx, row, func() error { return r.store.Index(ctx, row) })
	r.count(ctx, "index", row.Key, err, &r.t.indexed)
}

// settleFailed hands an unindexed row over to the sweep when its settle
// failed outright (throttled past its retries, a timeout): the write that
// would have indexed it or taken it out of play did not happen.
func (r *run) settleFailed(ctx context.Context, row Row, err error) {
	var conflict *ConflictError
	if err == nil || errors.Is(err, ErrDeadLettered) || errors.As(err, &conflict) {
		return
	}
	r.handOver(ctx, row)
}

// mayStart reports whether a send call carrying row may start now: the
// call, bounded by CallTimeout, ends before the row's lease does. A call
// that could outlast the lease could land after another worker expired
// the row and sent its successor, or sent it again.
func (r *run) mayStart(row Row) bool {
	// An unclaimed row has no lease to outlast: a send of it that lands
	// late is a duplicate at worst, as it is unordered (sendUnclaimed).
	return row.Unclaimed || !r.now().Add(r.policy.CallTimeout()).After(row.LeaseUntil)
}

// errNoResult stands in for a result the deliverer did not return; the row
// is retried, since it may or may not have been sent.
var errNoResult = errors.New("deliverer returned no result for this row")

// all runs f for 0..n-1 in parallel and waits; a serial run calls them
// in order instead.
func (r *run) all(n int, f func(int)) {
	if r.serial {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// settle records the outcome of one delivery attempt.
func (r *run) settle(ctx context.Context, row Row, sendErr error) {
	now := r.now()
	if IsUnrouted(sendErr) {
		r.t.unrouted.Add(1)
		r.log.WarnContext(ctx, "row has no route: retried until its attempts are spent, then dead-lettered", "key", row.Key, "queue", row.Queue,
			"attempt", row.Attempt, "max_attempts", r.policy.MaxAttempts)
	}
	switch {
	case sendErr == nil && row.Closed == ClosedDeadLetter:
		// The message closing a skipped dead letter's place is in its
		// place: the row becomes the dead letter it was to be (counted
		// when it was closed), and its group goes on.
		err := r.settleWrite(ctx, row, func() error { return r.store.DeadLetter(ctx, row, now, row.Errors) })
		r.count(ctx, "dead-letter", row.Key, err, nil)
		r.holdRow(row.Key, settledHold(row.CreatedAt))
		written := err == nil || errors.Is(err, ErrDeadLettered)
		r.settledFor(row, written && r.deadSettles(row), !(written && r.deadWaits(row)))
	case sendErr == nil:
		r.t.delivered.Add(1)
		err := r.settleWrite(ctx, row, func() error { return r.store.Done(ctx, row, now) })
		r.count(ctx, "done", row.Key, err, nil)
		r.settleFailed(ctx, row, err)
		r.holdRow(row.Key, settledHold(row.CreatedAt))
		r.settledFor(row, err == nil || r.doneAnyway(err, row), false)
	case (IsPermanent(sendErr) || row.Attempt >= r.policy.MaxAttempts) && r.closes(row):
		row = unsureAfter(row, now, sendErr)
		// Due once no unsure send of the row can land: its place's
		// message must not come before a late copy of the row.
		due := now
		if !row.UnsureAt.IsZero() && row.UnsureAt.Add(r.policy.UnsureWait()).After(due) {
			// The store keeps whole milliseconds, so the message may go
			// up to one before the wait ends: a copy of the row landing
			// after it is a copy of a closed place, which the consumer's
			// inbox takes for a duplicate. The successor still waits the
			// whole wait (SettlesAt).
			due = row.UnsureAt.Add(r.policy.UnsureWait())
		}
		r.log.InfoContext(ctx, "dead-lettering row; its place is closed first", "key", row.Key, "queue", row.Queue, "attempt", row.Attempt, "unsure_at", row.UnsureAt, "closed_at", due, "error", sendErr)
		hist := r.failure(row, now, sendErr)
		err := r.settleWrite(ctx, row, func() error { return r.store.Close(ctx, row, due, hist) })
		r.count(ctx, "close", row.Key, err, &r.t.deadLettered)
		if errors.Is(err, ErrDeadLettered) {
			// The store dead-lettered it instead (too large to close):
			// its group goes past it as before, with a gap.
			r.holdRow(row.Key, settledHold(row.CreatedAt))
			r.settledFor(row, r.deadSettles(row), r.deadHolds(row))
			return
		}
		r.holdRow(row.Key, hold{until: due, row: row.CreatedAt})
		r.settledFor(row, false, false)
	case IsPermanent(sendErr) || row.Attempt >= r.policy.MaxAttempts:
		row = unsureAfter(row, now, sendErr)
		// A closing message that failed for good may have closed
		// nothing: the dead letter says so (ClosedUnsent if it was not
		// sent, ClosedUnsure if it may have been; the purge forms after
		// a purge), and holds its group under either policy until an
		// operator purges it (its closing message is tried again) or,
		// if it was not sent, redrives it (the row goes in its place): a
		// successor sent past it would reach a GapWait consumer before
		// anything of its place could. A skipped row's was counted a
		// dead letter when it was closed.
		counted := &r.t.deadLettered
		if row.Closed == ClosedDeadLetter {
			counted = nil
		}
		if row.Closed != "" {
			// Unsure if this send, or an earlier one of the closing
			// message, may have landed (ClosingFailed): a redrive must
			// then not promise the row goes in its place.
			row.Closed = ClosingFailed(row, !Definite(sendErr))
			sendErr = fmt.Errorf("its place's closing message: %w", sendErr)
		}
		r.log.InfoContext(ctx, "dead-lettering row", "key", row.Key, "queue", row.Queue, "attempt", row.Attempt, "unsure_at", row.UnsureAt, "error", sendErr)
		hist := r.failure(row, now, sendErr)
		err := r.settleWrite(ctx, row, func() error { return r.store.DeadLetter(ctx, row, now, hist) })
		r.count(ctx, "dead-letter", row.Key, err, counted)
		r.settleFailed(ctx, row, err)
		r.holdRow(row.Key, settledHold(row.CreatedAt))
		written := err == nil || errors.Is(err, ErrDeadLettered)
		r.settledFor(row, written && r.deadSettles(row), !written || r.deadHolds(row))
	default:
		row = unsureAfter(row, now, sendErr)
		due := now.Add(r.policy.jittered(r.policy.Backoff(row.Attempt)))
		r.log.DebugContext(ctx, "retrying row", "key", row.Key, "queue", row.Queue, "attempt", row.Attempt, "due_at", due, "closed", row.Closed, "error", sendErr)
		hist := r.failure(row, now, sendErr)
		if row.Closed != "" {
			// A closing message's passing failures are not the row's: its
			// history keeps the row's own reason, which its dead letter
			// shows; the log says why the message waits.
			hist = row.Errors
		}
		err := r.settleWrite(ctx, row, func() error { return r.store.Retry(ctx, row, due, hist) })
		r.count(ctx, "retry", row.Key, err, &r.t.retried)
		r.settleFailed(ctx, row, err)
		h := hold{until: due, row: row.CreatedAt}
		if errors.Is(err, ErrDeadLettered) {
			h = settledHold(row.CreatedAt)
		}
		r.holdRow(row.Key, h)
		r.settledFor(row, false, false)
	}
}
