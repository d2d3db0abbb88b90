package dynamo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// ItemLimit is the largest item Outflow lets a row become, in bytes as
// ItemSize counts them. DynamoDB allows 400 KB (409,600 bytes); moto, the
// emulator the tests run against, refuses items over 405,000. Staying
// under both keeps every write Outflow makes to a row it staged possible.
const ItemLimit = 400_000

// MaxMessageBytes is the largest OUTFLOW_MAX_MESSAGE_BYTES: 384 KiB. A
// message of this size, stored as a row with a key, group and attributes
// at their limits, still leaves the room Growth needs under ItemLimit.
const MaxMessageBytes = 384 * 1024

// ErrItemTooLarge is wrapped by every error about a row's item size.
var ErrItemTooLarge = errors.New("item too large")

// ItemSize is an item's size as DynamoDB counts it: every attribute's name
// plus its value, 3 bytes for each list or map and 1 for each element in
// one. Numbers count as their text plus one byte, never less than
// DynamoDB's own count (about one byte per two digits, plus one).
func ItemSize(av map[string]types.AttributeValue) int {
	n := 0
	for name, v := range av {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value) + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + ItemSize(v.Value) + len(v.Value)
	case *types.AttributeValueMemberSS:
		n := 3
		for _, e := range v.Value {
			n += 1 + len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 3
		for _, e := range v.Value {
			n += 2 + len(e)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 3
		for _, e := range v.Value {
			n += 1 + len(e)
		}
		return n
	}
	return 0
}

// numMax is the most a stored number of Outflow's can count: 20 digits and
// a sign, plus one.
const numMax = 22

// Growth is the most a staged row's item can grow over its life: the claim
// (token, lease, claim time, a wider attempt), a full error history of
// messages at outbox.MaxErrorBytes (one more entry than the engine keeps,
// for a quarantine's), the last error, the dead-letter keys and the
// done-retention and redrive times. Staging refuses a row whose item plus
// Growth exceeds ItemLimit, so no later transition can fail on size.
func Growth(queue string) int {
	entry := 1 + 3 + len("at") + numMax + len("attempt") + numMax + len("message") + outbox.MaxErrorBytes + 3 + len("unsure") + 2
	n := claimGrowth +
		len(AttrStatus) + len(outbox.StatusPending) +
		len(AttrErrors) + 3 + (outbox.ErrorHistory+1)*entry +
		len(AttrLastError) + outbox.MaxErrorBytes +
		len(AttrFailedAt) + numMax + len(AttrDeadQueue) + len(deadQueue(queue)) + len(AttrUnsureAt) + numMax +
		len(AttrDoneAt) + numMax + len(AttrExpiresAt) + numMax + len(AttrRedrivenAt) + numMax + len(AttrPlaceMaybeClosed) + numMax
	return n
}

// claimGrowth is the part of Growth the claim itself takes.
const claimGrowth = len(AttrToken) + 26 + len(AttrLeaseUntil) + numMax + len(AttrClaimedAt) + numMax + len(AttrAttempt) + numMax

// deliveryState are the attributes Growth makes room for: what Outflow adds to
// a row after staging.
var deliveryState = []string{
	AttrToken, AttrLeaseUntil, AttrClaimedAt, AttrErrors, AttrLastError, AttrFailedAt, AttrDeadQueue, AttrUnsureAt,
	AttrDoneAt, AttrExpiresAt, AttrRedrivenAt, AttrPlaceMaybeClosed,
}

// baseSize is an item's size without the attributes Growth makes room for,
// so a row is measured alike at staging and at any later claim, whatever
// history it has gathered meanwhile.
func baseSize(av map[string]types.AttributeValue) int {
	n := ItemSize(av)
	for _, name := range deliveryState {
		if v, ok := av[name]; ok {
			n -= len(name) + valueSize(v)
		}
	}
	return n
}

// checkSize reports, wrapping ErrItemTooLarge, an item whose content leaves
// less than Growth under ItemLimit. Staging applies it to every row, and
// the claim to rows other producers wrote.
func checkSize(key, queue string, av map[string]types.AttributeValue) error {
	size, room := baseSize(av), Growth(queue)
	if size+room > ItemLimit {
		return fmt.Errorf("%w: row %s is %d bytes without its delivery state; with the %d bytes that may add, it would pass the %d-byte item limit",
			ErrItemTooLarge, key, size, room, ItemLimit)
	}
	return nil
}

// isSizeError reports whether DynamoDB refused a write because the item
// would pass its size limit.
func isSizeError(err error) bool {
	var api interface {
		ErrorCode() string
		ErrorMessage() string
	}
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException" &&
		strings.Contains(api.ErrorMessage(), "exceeded the maximum allowed size")
}

// refusal returns DynamoDB's message when err is a ValidationException
// other than the size limit's: a refusal of what this item holds, which no
// retry changes.
func refusal(err error) (string, bool) {
	var api interface {
		ErrorCode() string
		ErrorMessage() string
	}
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" && !isSizeError(err) {
		return api.ErrorMessage(), true
	}
	return "", false
}
