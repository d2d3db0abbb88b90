package dynamo

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// This file is Outflow's one definition of a malformed item: an item whose
// state-machine attributes no transition can read or move on. The decoder
// (decodeState, in Go) and the quarantine (validState, as a DynamoDB
// condition) apply the same rules in the same order, so an item the claim
// refuses for being malformed is always one the quarantine accepts, and a
// valid row is never quarantined.
//
//  1. status is a string, one of pending, claimed, done, failed;
//  2. attempt is a number in [0, maxStoredAttempt];
//  3. a claimed row's lease_until, if it has one, is a number (a claimed
//     row with none is under a lease already lapsed: see lapsedLease);
//  4. a row neither pending nor claimed has no shard and no due_at, since
//     it would otherwise sit in the due index with no transition to take it
//     out;
//  5. a claimed row's lease_until is at most leaseCeiling past now, since
//     a longer lease (one written in microseconds, say) would hold the row
//     for ever.
//
// Rule 5 reads the clock, so decodeState leaves it to leaseRule, which the
// claim applies to the item that refused it; validState takes the time.
//
// Conditions cannot tell an integer from a fraction, so a fractional
// attempt passes the rules; the full Decode refuses it, after a claim, and
// the engine dead-letters the claimed row with that reason.

// maxStoredAttempt bounds a stored attempt so it converts to an int.
const maxStoredAttempt = math.MaxInt32

// leaseCeiling is how far past now a claimed row's lease_until may be:
// twice the longest lease, so that clock skew between workers never makes a
// valid claim look malformed.
const leaseCeiling = 2 * outbox.MaxLease

var statuses = []outbox.Status{outbox.StatusPending, outbox.StatusClaimed, outbox.StatusDone, outbox.StatusFailed}

// state is the part of an item the state machine's conditions read.
type state struct {
	Status     outbox.Status
	Attempt    int
	LeaseUntil int64
	DueAt      int64
}

// decodeState reads av's state-machine attributes, or says which rule of
// the malformed definition they break, in an error wrapping ErrMalformed.
func decodeState(av map[string]types.AttributeValue) (state, error) {
	var st state
	s, ok := av[AttrStatus].(*types.AttributeValueMemberS)
	switch {
	case av[AttrStatus] == nil:
		return st, fmt.Errorf("%w: missing %s", ErrMalformed, AttrStatus)
	case !ok:
		return st, fmt.Errorf("%w: %s must be a string, got %s", ErrMalformed, AttrStatus, typeName(av[AttrStatus]))
	case !outbox.Status(s.Value).Valid():
		return st, fmt.Errorf("%w: unknown %s %q", ErrMalformed, AttrStatus, s.Value)
	}
	st.Status = outbox.Status(s.Value)

	n, ok := av[AttrAttempt].(*types.AttributeValueMemberN)
	if !ok {
		if av[AttrAttempt] == nil {
			return st, fmt.Errorf("%w: missing %s", ErrMalformed, AttrAttempt)
		}
		return st, fmt.Errorf("%w: %s must be a number, got %s", ErrMalformed, AttrAttempt, typeName(av[AttrAttempt]))
	}
	a, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || a < 0 || a > maxStoredAttempt {
		return st, fmt.Errorf("%w: %s must be in [0, %d], got %s", ErrMalformed, AttrAttempt, maxStoredAttempt, n.Value)
	}
	// A fraction counts as the next whole attempt: it can only be nearer
	// the budget than it looks.
	st.Attempt = int(math.Ceil(a))

	if st.Status == outbox.StatusClaimed && av[AttrLeaseUntil] != nil {
		l, ok := av[AttrLeaseUntil].(*types.AttributeValueMemberN)
		if !ok {
			return st, fmt.Errorf("%w: %s must be a number, got %s", ErrMalformed, AttrLeaseUntil, typeName(av[AttrLeaseUntil]))
		}
		st.LeaseUntil = clampMs(l.Value)
	}

	if st.Status != outbox.StatusPending && st.Status != outbox.StatusClaimed {
		if av[AttrShard] != nil || av[AttrDueAt] != nil {
			return st, fmt.Errorf("%w: %s, yet still in the due index (%s and %s must be removed)", ErrMalformed, st.Status, AttrShard, AttrDueAt)
		}
	}
	if d, ok := av[AttrDueAt].(*types.AttributeValueMemberN); ok {
		st.DueAt = clampMs(d.Value)
	}
	return st, nil
}

// leaseRule is rule 5 of the malformed definition: it says, in an error
// wrapping ErrMalformed, when a claimed row's lease ends too far past now.
func leaseRule(status outbox.Status, leaseUntilMs int64, now time.Time) error {
	if status == outbox.StatusClaimed && leaseUntilMs > now.Add(leaseCeiling).UnixMilli() {
		return fmt.Errorf("%w: claimed with %s more than %s past now", ErrMalformed, AttrLeaseUntil, leaseCeiling)
	}
	return nil
}

// validState is the malformed definition's rules as a DynamoDB condition at
// now: it holds exactly when decodeState and leaseRule return no error.
// Each rule checks the type before comparing, so a wrong type fails the
// rule, never the request.
func validState(now time.Time) expression.ConditionBuilder {
	status, attempt := expression.Name(AttrStatus), expression.Name(AttrAttempt)
	known := make([]expression.OperandBuilder, 0, len(statuses))
	for _, s := range statuses {
		known = append(known, expression.Value(s))
	}
	rule1 := status.AttributeType(expression.String).And(status.In(known[0], known[1:]...))
	rule2 := attempt.AttributeType(expression.Number).
		And(attempt.Between(expression.Value(0), expression.Value(maxStoredAttempt)))
	lease := expression.Name(AttrLeaseUntil)
	rule3 := status.NotEqual(expression.Value(outbox.StatusClaimed)).
		Or(expression.AttributeNotExists(lease)).Or(lease.AttributeType(expression.Number))
	rule4 := status.In(expression.Value(outbox.StatusPending), expression.Value(outbox.StatusClaimed)).
		Or(expression.AttributeNotExists(expression.Name(AttrShard)).And(expression.AttributeNotExists(expression.Name(AttrDueAt))))
	rule5 := status.NotEqual(expression.Value(outbox.StatusClaimed)).Or(expression.AttributeNotExists(lease)).
		Or(lease.AttributeType(expression.Number).And(lease.LessThanEqual(expression.Value(now.Add(leaseCeiling).UnixMilli()))))
	return rule1.And(rule2).And(rule3).And(rule4).And(rule5)
}

// lapsedLease holds for a claimed row whose lease ended before nowMs, or
// that has no lease_until at all: Outflow always writes one with a claim,
// so a claimed row without one was written by hand (a producer in another
// language, a copy of an item) and no worker holds it. Counting it as
// lapsed lets the next claim take it, on the row's attempt budget, instead
// of leaving it claimed for ever.
func lapsedLease(nowMs int64) expression.ConditionBuilder {
	lease := expression.Name(AttrLeaseUntil)
	return expression.Name(AttrStatus).Equal(expression.Value(outbox.StatusClaimed)).
		And(expression.AttributeNotExists(lease).Or(lease.LessThan(expression.Value(nowMs))))
}

// clampMs reads a stored millisecond number, clamped to what int64 holds.
// A number DynamoDB accepted always parses as a float.
func clampMs(s string) int64 {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v
	}
	f, _ := strconv.ParseFloat(s, 64)
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// typeName names an attribute value's DynamoDB type, for error messages.
func typeName(av types.AttributeValue) string {
	switch av.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	}
	return fmt.Sprintf("%T", av)
}
