package outbox

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Status is where a row stands in the state machine.
type Status string

// The statuses a stored row can have. A done row is usually deleted rather
// than kept, so StatusDone is only seen when a retention period is set.
const (
	StatusPending Status = "pending"
	StatusClaimed Status = "claimed"
	StatusDone    Status = "done"
	StatusFailed  Status = "failed"
)

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusClaimed, StatusDone, StatusFailed:
		return true
	}
	return false
}

// AttrTraceParent is the row attribute that holds the W3C trace context
// (traceparent) of the code that staged the row. It is context, not
// content: two stagings of a key that differ only in it are the same row.
const AttrTraceParent = "traceparent"

// FIFORoute reports whether the route queue names a FIFO queue: its name
// ends in .fifo, as SQS requires of FIFO queue names. Only FIFO routes
// have message groups.
func FIFORoute(queue string) bool { return strings.HasSuffix(queue, ".fifo") }

// Row is one outbox row: a message bound for a queue, and its delivery state.
type Row struct {
	// Key is the dispatch key: unique per row, sent with every delivery so
	// consumers can drop duplicates.
	Key string
	// Queue is the route name; the deliverer maps it to a real queue.
	Queue string
	// Payload is the message body, byte for byte.
	Payload []byte
	// Attributes become message attributes on every delivery.
	Attributes map[string]string
	// Group is the FIFO message group; required for FIFO queues only.
	Group string
	// NotBefore delays the first delivery; zero means deliver now.
	NotBefore time.Time
	// Seq is the row's place in its ordered group, from 1; 0 for a row
	// staged without order.
	Seq int64
	// Prev is the key of the row staged just before it in its ordered
	// group; empty for the group's first row and for unordered rows.
	Prev string
	// Closed is set on a row of an ordered group whose place is closed: a
	// dead letter its group goes past (ClosedDeadLetter), or one an
	// operator purged (ClosedPurged). It is sent in its place as a
	// message that closes the place, never as its payload, so the
	// consumer's cursor moves past it instead of waiting for it.
	Closed string

	Status Status
	// Attempt counts delivery attempts that were claimed, including claims
	// that were lost to a crash. It is 0 until the first claim.
	Attempt   int
	CreatedAt time.Time
	DueAt     time.Time
	// Token is the claim token of the current claim; empty unless claimed.
	Token string
	// StageID is a random value each staging of a row writes (empty for a
	// row staged without it): it tells this row from a later one of its
	// key, staged in the same millisecond too. The wake sends a row
	// without a claim only if it has one (see Engine.DeliverRefs).
	StageID string
	// Unclaimed marks a row the engine sends without a claim: the wake's
	// image of a fresh unordered row (see Engine.DeliverRefs). Its settle
	// holds only while the row is still as staged (see Store.Done).
	Unclaimed bool
	// Unindexed marks a pending or claimed row that is not in the due
	// index: a lean row (staged with no shard, see Policy.Lean), or a
	// hand-written one. Only its stream record or the backstop's scan
	// finds it, so a run that leaves it unsettled puts it in the index
	// (Store.Index) instead of leaving it to a sweep that cannot see it.
	Unindexed  bool
	LeaseUntil time.Time
	FailedAt   time.Time
	// UnsureAt is the latest time a send of this row ended with its
	// outcome unknown (see Definite), or a claim of it lapsed (its holder
	// may have sent it up to the lease's end); zero if never. It is kept
	// for the row's life, redrives included: a request stored late can
	// land until UnsureAt plus Policy.UnsureWait.
	UnsureAt time.Time
	// RedrivenAt is when an operator last redrove the row, zero if never.
	// A redrive gives the row a fresh budget, so the attempts in Errors
	// count from 1 again after it.
	RedrivenAt time.Time
	// PlaceMaybeClosed is when an operator redrove the row as late,
	// though the message closing its place may have reached the consumer
	// (MayHaveClosed); zero if never. It is kept for the row's life: a
	// closing message of the place that fails later says the place may be
	// closed (ClosingFailed), whatever that send did, and a plain redrive
	// is refused.
	PlaceMaybeClosed time.Time
	// Errors is the recent attempt history, oldest first.
	Errors    []AttemptError
	LastError string
	// ContentDigest is set on a delivered row kept as done (a tombstone),
	// whose settle dropped its Payload and Attributes: a digest of them,
	// so a producer's retry of the key is still told from other content
	// (see dynamo.SameContent). Empty on every other row.
	ContentDigest string

	// Malformed is set by a store that claimed a row it could not fully
	// read. The engine dead-letters such a row with this reason instead of
	// delivering it.
	Malformed string
}

// AttemptError records why one delivery attempt failed.
type AttemptError struct {
	At      time.Time
	Attempt int
	Message string
	// Unsure says the attempt's outcome is unknown: the send failed in a
	// way that does not prove the target did not store it (see Definite).
	// It is for operators reading the history; the rule reads
	// Row.UnsureAt, which no later attempt can hide.
	Unsure bool
}

// ErrorHistory is how many attempt errors a row keeps; older ones are
// dropped so a row never grows past DynamoDB's item size limit.
const ErrorHistory = 5

// errorHistory is ErrorHistory, for the package's own use.
const errorHistory = ErrorHistory

// MaxErrorBytes bounds one stored error message, in bytes. Stores leave
// room for ErrorHistory (plus one) messages of this size when they check a
// row's size at staging, so a growing history never pushes a row over its
// store's item limit.
const MaxErrorBytes = 512

// TruncateError cuts msg to at most MaxErrorBytes bytes, at a character
// boundary, marking the cut with "…".
func TruncateError(msg string) string {
	if len(msg) <= MaxErrorBytes {
		return msg
	}
	const mark = "…"
	cut := MaxErrorBytes - len(mark)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + mark
}

// withError returns the row's history with e appended, trimmed to the last
// errorHistory entries, its message truncated to MaxErrorBytes. It never
// aliases the row's slice.
func (r Row) withError(e AttemptError) []AttemptError {
	e.Message = TruncateError(e.Message)
	hist := make([]AttemptError, 0, errorHistory)
	start := 0
	if n := len(r.Errors) + 1; n > errorHistory {
		start = n - errorHistory
	}
	if start < len(r.Errors) {
		hist = append(hist, r.Errors[start:]...)
	}
	return append(hist, e)
}

// expirable reports whether a row that could not be claimed has spent its
// budget and can never be claimed again: a claim whose lease lapsed on the
// final attempt, or a due pending row already at the budget (the budget was
// lowered while it waited).
func (r Row) expirable(now time.Time, maxAttempts int) bool {
	if r.Attempt < maxAttempts {
		return false
	}
	switch r.Status {
	case StatusClaimed:
		return now.After(r.LeaseUntil)
	case StatusPending:
		return !r.DueAt.After(now)
	}
	return false
}

// DueRef is one entry of the due index: enough to decide whether to claim.
type DueRef struct {
	Key       string
	Shard     int
	DueAt     time.Time
	CreatedAt time.Time
	// Queue is the row's route, read from the index so the engine knows,
	// before any claim, whether the row is on an ordered route.
	Queue string
	// Prev is the key of the row's predecessor in its ordered group. A
	// DueRef whose Linked is set knows it (empty: the row has none);
	// otherwise the engine reads it when the route is ordered.
	Prev   string
	Linked bool
	// Seq is the row's place in its group when Linked, 0 if unknown. Its
	// predecessor's place is Seq-1: a key delivered and staged again is a
	// new row with another place, which a check must not take for the
	// predecessor its successor names.
	Seq int64
	// Cursor, when set on the last entry of a page, is the store's own
	// position after it (DynamoDB's LastEvaluatedKey as returned), for the
	// next QueryDue to resume exactly there. Opaque to the engine.
	Cursor any
	// Image, when set, is the row as its stream record inserted it: the
	// wake may send it without a claim (see Engine.DeliverRefs).
	Image *Row
}

// The reasons a row's place in its ordered group is closed (Row.Closed).
const (
	// ClosedDeadLetter is a dead letter of a route whose groups go past
	// their dead letters (skip).
	ClosedDeadLetter = "dead-letter"
	// ClosedPurged is a dead letter an operator purged.
	ClosedPurged = "purged"
	// ClosedUnsent marks a dead letter whose closing message was not sent
	// (its own attempts spent, each refused for certain, or never made),
	// one no operator purged: its place is open, so it holds its group
	// under either policy (see Link.Closed). It is never sent as it is; a
	// purge tries its closing message again, and a redrive sends the row
	// itself, in its place. (0.1.0 wrote it for ClosedUnsure too.)
	ClosedUnsent = "unsent"
	// ClosedPurgeUnsent marks a dead letter whose purge's closing message
	// was not sent. It holds its group as ClosedUnsent does; a second
	// purge deletes it (the operator gives the place up: a GapPass
	// consumer passes it), and a redrive sends the row itself.
	ClosedPurgeUnsent = "purge-unsent"
	// ClosedUnsure marks a dead letter whose closing message failed for
	// good after a send of it ended with its outcome unknown (a timeout:
	// the target may have stored it), or its claim lapsed: the message may
	// have reached the consumer, which then closed the place, or may not
	// have. Its place counts as open and holds its group as ClosedUnsent
	// does; a purge sends the closing message again (a consumer that had
	// it drops the copy). A redrive is refused unless asked for as late
	// (see MayHaveClosed): the row could reach a GapWait consumer after
	// its place was closed, to be recorded late and applied nowhere.
	ClosedUnsure = "unsure"
	// ClosedPurgeUnsure is ClosedUnsure for a purge's closing message: a
	// second purge deletes the row, as after ClosedPurgeUnsent.
	ClosedPurgeUnsure = "purge-unsure"
)

// Unsent is the closed of a row whose closing message, for closed, was
// not sent.
func Unsent(closed string) string {
	if closed == ClosedPurged {
		return ClosedPurgeUnsent
	}
	return ClosedUnsent
}

// ClosingFailed is the closed of row, a closing message (row.Closed is
// ClosedDeadLetter or ClosedPurged) that failed for good: ClosedUnsure or
// ClosedPurgeUnsure if it may have reached the consumer, ClosedUnsent or
// ClosedPurgeUnsent if it certainly did not. It may have if unsure (its
// last send ended unsure, or its claim lapsed), or if a send of it since
// its place was closed ended unsure: row.UnsureAt is later than its last
// recorded error, which the row's own failure wrote when its place was
// closed (a closing message's passing failures are not recorded). A row
// with no readable history and an UnsureAt counts as unsure. A purge's
// closing message counts as unsure too when the dead letter's last
// recorded failure was (Unsure): that may be an earlier closing message
// of the place that may have landed (ClosedUnsure before the purge), or
// the row's own send, which cannot be told apart, so it errs on the side
// of telling the operator the place may be closed.
func ClosingFailed(row Row, unsure bool) string {
	last := AttemptError{}
	if len(row.Errors) > 0 {
		last = row.Errors[len(row.Errors)-1]
	}
	if !unsure && !row.UnsureAt.IsZero() {
		unsure = len(row.Errors) == 0 || row.UnsureAt.UnixMilli() > last.At.UnixMilli()
	}
	if !unsure && row.Closed == ClosedPurged {
		unsure = last.Unsure
	}
	// A row redriven as late had a closing message that may have landed
	// before: this one failing says nothing of that one.
	unsure = unsure || !row.PlaceMaybeClosed.IsZero()
	switch {
	case unsure && row.Closed == ClosedPurged:
		return ClosedPurgeUnsure
	case unsure:
		return ClosedUnsure
	}
	return Unsent(row.Closed)
}

// MayHaveClosed reports whether closed says a place's closing message may
// have reached the consumer although it failed for good (ClosedUnsure,
// ClosedPurgeUnsure): a redrive of the row could arrive after its place
// was closed, and a GapWait consumer would record it late and apply it
// nowhere.
func MayHaveClosed(closed string) bool {
	return closed == ClosedUnsure || closed == ClosedPurgeUnsure
}

// PlaceOpen reports whether a row's closed (Row.Closed) says its place's
// closing message failed for good: its place may have reached the
// consumer neither as the row nor closed (for certain, or, for
// MayHaveClosed, perhaps).
func PlaceOpen(closed string) bool {
	return closed == ClosedUnsent || closed == ClosedPurgeUnsent || MayHaveClosed(closed)
}
