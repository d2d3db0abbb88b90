package outbox

import "time"

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
	Found   bool
	Status  Status
	Attempt int
	Queue   string
	// Group is the row's FIFO message group, empty if it has none.
	Group    string
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
	// UnsureAt is the row's Row.UnsureAt: the latest time one of its
	// sends ended with its outcome unknown, or a claim of it lapsed; zero
	// if never. The target may still store such a request: under skip,
	// the row's successors wait until UnsureAt is Policy.UnsureWait old,
	// so a late copy of it cannot land after them.
	UnsureAt time.Time
	// Closed is the row's Row.Closed. A dead letter whose place's closing
	// message failed for good (PlaceOpen) never lets a successor go,
	// under either policy: its place may have reached the consumer
	// neither as the row nor closed, and a successor sent past it would
	// wait at a GapWait consumer for a message that could then only come
	// after it. An operator purges it (its closing message is tried
	// again; after a purge's failed, a second purge deletes it and gives
	// the place up) or, if that message was not sent (not
	// MayHaveClosed), redrives it (the row goes in its place). A dead letter with
	// a place whose Closed is empty was never closed (see Unclosed).
	Closed string
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
// done, or a dead letter none of whose sends ever ended unsure, whose
// place is closed (neither open, PlaceOpen, nor never closed, Unclosed),
// and dh is skip. A state no writer of Outflow's leaves counts as a dead
// letter: the row cannot go on. An unsure dead letter under skip settles
// only once its wait is over, which SettlesAt says.
func (l Link) Settles(dh DeadHead) bool {
	if !l.Found || l.Status == StatusDone {
		return true
	}
	if l.Status == StatusPending || l.Status == StatusClaimed || l.Malformed != "" {
		return false
	}
	return dh == DeadHeadSkip && l.UnsureAt.IsZero() && !PlaceOpen(l.Closed) && !l.Unclosed(dh)
}

// Unclosed reports whether l is a dead letter with a place in an ordered
// group of a FIFO route whose place no message ever closed (Closed is
// empty), under skip: it was dead-lettered while its route was under
// block, or not listed (a producer ordered its rows, held as block), and
// the route is now listed under skip. Its successor must not go past it
// until its closing message is in its place: the run sends it first, as
// the skip path does at dead-lettering (Store.Close of the failed row),
// and the successor then follows the closing message. It neither settles
// nor blocks: it waits for that message.
func (l Link) Unclosed(dh DeadHead) bool {
	return dh == DeadHeadSkip && l.Found && l.Status == StatusFailed && l.Malformed == "" &&
		l.Closed == "" && l.Seq > 0 && FIFORoute(l.Queue)
}

// SettlesAt reports whether a predecessor in the state l lets its
// successor go at now, under dh: Settles, or a dead letter under skip
// whose last unsure send was at least wait before now (see
// Policy.UnsureWait).
func (l Link) SettlesAt(dh DeadHead, now time.Time, wait time.Duration) bool {
	return l.Settles(dh) || (l.waitsOut(dh) && !now.Before(l.UnsureAt.Add(wait)))
}

// waitsOut reports whether l is a dead letter under skip a send of which
// ended unsure: its group waits, for a bounded time, rather than blocks.
func (l Link) waitsOut(dh DeadHead) bool {
	return l.Found && l.Status == StatusFailed && l.Malformed == "" && !PlaceOpen(l.Closed) && !l.UnsureAt.IsZero() && dh == DeadHeadSkip && !l.Unclosed(dh)
}

// Blocks reports whether a predecessor in the state l holds its successor
// until an operator acts, under the dead-head policy dh: it neither settles
// nor is on its way (pending or claimed) nor waits out an unsure attempt
// nor waits for the run to close its place (Unclosed), so it is a dead
// letter, or in a state no writer of Outflow's leaves, and dh is block,
// or its place is open (PlaceOpen) or unreadable.
func (l Link) Blocks(dh DeadHead) bool {
	return !l.Settles(dh) && l.Status != StatusPending && l.Status != StatusClaimed && !l.waitsOut(dh) && !l.Unclosed(dh)
}
