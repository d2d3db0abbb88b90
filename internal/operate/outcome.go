package operate

import (
	"fmt"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Outcome is how a row ended, or where it stands: Name is a stable code
// for scripts (the JSON's outcome), Detail a sentence for an operator
// (outcome_detail). Every view names a row's outcome with OutcomeOf, so
// that a purged row never reads as delivered.
type Outcome struct {
	Name   string
	Detail string
}

// The outcomes OutcomeOf names. A row's own message was delivered only
// under OutcomeDelivered; every purged and dead-letter outcome means it
// was not (a redrive would send it).
const (
	// OutcomePending is a row staged and not yet tried.
	OutcomePending = "pending"
	// OutcomeRetrying is a row with a failed or lost attempt, waiting for
	// its next.
	OutcomeRetrying = "retrying"
	// OutcomeClaimed is a row a sweep or the wake is sending now.
	OutcomeClaimed = "claimed"
	// OutcomeRedriven is a row an operator redrove, pending or claimed.
	OutcomeRedriven = "redriven"
	// OutcomeDelivered is a row sent and settled done (kept for the done
	// retention).
	OutcomeDelivered = "delivered"
	// OutcomeClosing is a dead letter of a skip route whose place's
	// closing message waits to be sent, or is being sent.
	OutcomeClosing = "closing"
	// OutcomePurging is a purged dead letter whose closing message waits
	// to be sent, or is being sent.
	OutcomePurging = "purging"
	// OutcomePurged is a purged dead letter whose closing message was
	// sent: the row itself never was.
	OutcomePurged = "purged"
	// OutcomePurgedUnsent is a purged dead letter whose closing message
	// was not sent.
	OutcomePurgedUnsent = "purged-unsent"
	// OutcomePurgedUnsure is a purged dead letter whose closing message
	// failed for good but may have reached the consumer.
	OutcomePurgedUnsure = "purged-unsure"
	// OutcomeDeadLetter is a dead letter whose place (if it has one) no
	// message closed.
	OutcomeDeadLetter = "dead-letter"
	// OutcomeDeadLetterClosed is a dead letter of a skip route whose
	// place a closing message closed.
	OutcomeDeadLetterClosed = "dead-letter-closed"
	// OutcomeDeadLetterUnsent is a dead letter whose closing message was
	// not sent.
	OutcomeDeadLetterUnsent = "dead-letter-unsent"
	// OutcomeDeadLetterUnsure is a dead letter whose closing message
	// failed for good but may have reached the consumer.
	OutcomeDeadLetterUnsure = "dead-letter-unsure"
	// OutcomeUnknown is a status and closed the dispatcher never writes
	// together (another producer's item, a hand edit): the raw item says
	// more.
	OutcomeUnknown = "unrecognized"
)

// notSent is what every purged and dead-letter outcome says of the row's
// own message.
const notSent = "its own message was not delivered"

// maybeSent is what they say instead when a send of the row ended with
// its outcome unknown (unsure_at set: a timeout after SQS may have stored
// it, a lapsed claim): it may have been delivered, and applied (review
// R50-3).
const maybeSent = "its own message may have been delivered: a send of it ended with its outcome unknown"

// OutcomeOf names the outcome of a row from its stored fields: status,
// closed (outbox.Row.Closed), attempts, whether it was ever redriven
// (redriven_at set) and whether a send of it ended unsure (unsure_at
// set), which turns "not delivered" into "may have been delivered". It reads them as the dispatcher and the operator
// commands write them:
//
//   - pending, closed unset: staged (attempt 0) or waiting for a retry
//     after a failed or lost attempt (Store.Retry, Store.Release gives an
//     unsent attempt back); a redrive (Store.Redrive) sets redriven_at,
//     attempt 0 and removes closed.
//   - claimed, closed unset: being sent (Store.Claim).
//   - done, closed unset: delivered (Store.Done keeps the row as done only
//     under a done retention; otherwise it is deleted).
//   - pending or claimed, closed dead-letter: a final failure on a skip
//     route (run.settle, closeExpired): Store.Close set attempt 0 and
//     closed, and the row waits to be sent as the message closing its
//     place, never as itself.
//   - failed, closed dead-letter: that closing message was sent
//     (run.settle's first case writes Store.DeadLetter); its group went
//     past it. Its attempts count the closing message's sends.
//   - pending or claimed, closed purged: Operator.Purge of a dead letter
//     with a place set attempt 0 and closed purged; the closing message
//     waits to be sent.
//   - done, closed purged: the purge's closing message was sent
//     (run.settle's Store.Done of a closed row): the row reads status done
//     with the closing message's attempts, but only its place's closing
//     message went, never the row.
//   - failed, closed unsent, unsure, purge-unsent or purge-unsure: a
//     closing message that failed for good (outbox.ClosingFailed, Expire,
//     closeExpired's never-tried ClosedUnsent); unsent for certain, or
//     perhaps landed.
//   - failed, closed purged: a purge's closing message dead-lettered by a
//     store's size refusal (Store.failTooLarge keeps closed as it was);
//     it may have gone, so it counts as unsure, as outbox.ClosingFailed
//     errs when it cannot tell.
//   - failed, closed unset: a dead letter whose place (if any) no message
//     closed.
//
// Any other pair (done with a failed closing message, pending with
// unsent, a closed value or status not listed) is not one the dispatcher
// writes: OutcomeUnknown, naming both. A consumer-side outcome such as a
// place its Inbox closed as restaged (consume.ClosedRestaged) is no row's
// state: the dispatcher delivered that row (OutcomeDelivered).
func OutcomeOf(status outbox.Status, closed string, attempts int, redriven, unsure bool) Outcome {
	own := notSent
	if unsure {
		own = maybeSent
	}
	return outcomeOf(status, closed, attempts, redriven, own)
}

// listedSent is what a list of dead letters says of a row's own message:
// the dead index does not project unsure_at, so a list cannot tell a row
// no send of which landed from one a send of which may have (review
// R50-3); it says so rather than claim the first.
const listedSent = "its own message was not delivered, unless a send of it ended with its outcome unknown (dead show says)"

// ListedOutcome is OutcomeOf for an entry of the dead index (dead list,
// stats, the console's lists), which holds a dead letter's closed and
// attempts but neither redriven_at nor unsure_at.
func ListedOutcome(closed string, attempts int) Outcome {
	return outcomeOf(outbox.StatusFailed, closed, attempts, false, listedSent)
}

// outcomeOf is OutcomeOf with what it says of the row's own message.
func outcomeOf(status outbox.Status, closed string, attempts int, redriven bool, own string) Outcome {
	after := ""
	if redriven {
		after = " after a redrive"
	}
	switch status {
	case outbox.StatusPending, outbox.StatusClaimed:
		claimed := status == outbox.StatusClaimed
		switch closed {
		case "":
			switch {
			case redriven && claimed:
				return Outcome{OutcomeRedriven, "redriven by an operator: being sent again now"}
			case redriven:
				return Outcome{OutcomeRedriven, "redriven by an operator: waiting to be sent again"}
			case claimed:
				return Outcome{OutcomeClaimed, "being sent now"}
			case attempts > 0:
				return Outcome{OutcomeRetrying, fmt.Sprintf("not delivered yet: %d attempt(s) failed or were lost; waiting for the next", attempts)}
			}
			return Outcome{OutcomePending, "staged, not yet sent"}
		case outbox.ClosedDeadLetter:
			return Outcome{OutcomeClosing, "dead-lettered" + after + " on a skip route: " + own + "; the message closing its place " + waitsOrGoes(claimed) + ", then it is a dead letter"}
		case outbox.ClosedPurged:
			return Outcome{OutcomePurging, "purged by an operator" + after + ": " + own + "; the message closing its place " + waitsOrGoes(claimed) + " in its stead"}
		}
	case outbox.StatusDone:
		switch closed {
		case "":
			return Outcome{OutcomeDelivered, "delivered" + after}
		case outbox.ClosedPurged:
			return Outcome{OutcomePurged, "purged by an operator: " + own + "; the message closing its place was sent in its stead (status done and attempts are the closing message's)"}
		}
	case outbox.StatusFailed:
		switch closed {
		case "":
			return Outcome{OutcomeDeadLetter, "dead-lettered" + after + ": " + own}
		case outbox.ClosedDeadLetter:
			return Outcome{OutcomeDeadLetterClosed, "dead-lettered" + after + " on a skip route: " + own + "; the message closing its place was sent, and its group went past it (attempts are the closing message's)"}
		case outbox.ClosedUnsent:
			return Outcome{OutcomeDeadLetterUnsent, "dead-lettered" + after + ": " + own + "; the message closing its place was not sent either (a redrive sends the row in its place, a purge tries the closing message again)"}
		case outbox.ClosedUnsure:
			return Outcome{OutcomeDeadLetterUnsure, "dead-lettered" + after + ": " + own + "; the message closing its place failed but may have reached the consumer (a purge sends it again; a redrive needs --late)"}
		case outbox.ClosedPurgeUnsent:
			return Outcome{OutcomePurgedUnsent, "purged by an operator: " + own + "; the message closing its place was not sent (a second purge deletes the row and gives the place up)"}
		case outbox.ClosedPurgeUnsure, outbox.ClosedPurged:
			return Outcome{OutcomePurgedUnsure, "purged by an operator: " + own + "; the message closing its place failed but may have reached the consumer (a second purge deletes the row)"}
		}
	}
	return Outcome{OutcomeUnknown, fmt.Sprintf("status %q with closed %q: not a state the dispatcher writes; read the raw item", status, closed)}
}

// waitsOrGoes says whether a closing message is being sent (claimed) or
// waits to be.
func waitsOrGoes(claimed bool) string {
	if claimed {
		return "is being sent now"
	}
	return "waits to be sent"
}

// Delivered reports whether an outcome means the row's own message was
// delivered: the one answer to "did it go out?" that is yes.
func (o Outcome) Delivered() bool { return o.Name == OutcomeDelivered }

// String is the outcome as a text view prints it: its name and detail.
func (o Outcome) String() string { return o.Name + ": " + o.Detail }
