package consume

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBAPI is the part of the DynamoDB client an Inbox uses.
type DynamoDBAPI interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// GapPolicy says what an Inbox does with a message whose group has an
// earlier place not yet applied.
type GapPolicy int

const (
	// GapWait refuses it (an *OrderError, ErrGap): the message is retried
	// until the missing places are applied or closed, or until the
	// queue's redrive policy takes it away. Outflow sends every place as
	// its row or as a message closing it (Close), under either dead-head
	// policy, so the wait ends; it is the default.
	GapWait GapPolicy = iota
	// GapPass applies it and moves the group's cursor past the gap,
	// recording the places passed on the message's inbox item: for the
	// places Outflow could not close (docs/consuming.md says which). It
	// is sound on a FIFO queue only: there Outflow sends a place only
	// once every earlier one was delivered, closed or dead-lettered, and
	// SQS delivers a group in the order sent, so a place that has not
	// arrived never will.
	GapPass
)

// Inbox records, in the consumer's own DynamoDB transaction, which
// messages a consumer applied and how far each ordered group has come,
// so a duplicate is refused and an ordered group is applied in order.
type Inbox struct {
	api      DynamoDBAPI
	table    string
	consumer string
	ttl      time.Duration
	gaps     GapPolicy
	late     LatePolicy
	join     JoinPolicy
	now      func() time.Time
}

// LatePolicy says what an Inbox does with a message whose group has
// applied a later place and never the message's own: a dead letter an
// operator redrove after its group went past it (skip), or a copy older
// than the inbox's TTL. Either way the message is never retried: a
// retry could not change its place.
type LatePolicy int

const (
	// LateRecord, the default, applies nothing: it writes the message's
	// inbox item, marked late with the place its group had reached
	// (late_after) and not applied (applied = false), and Apply returns
	// an error wrapping ErrLate, which Handler and Poller acknowledge.
	// The group's order is never broken; find late messages by their
	// inbox items' late_after. The record stands for no effect: should
	// Outflow stage the key again and it arrive in its group's turn, it
	// is applied there, the record replaced.
	LateRecord LatePolicy = iota
	// LateApply applies the effect out of order, with the message's
	// inbox item marked late, and leaves the group's cursor where it is.
	// Choose it where the effect does not depend on the group's order.
	LateApply
)

// JoinPolicy says where an Inbox starts an ordered group it has no
// cursor for, at the first message of the group this consumer sees. A
// group's cursor, once written, is kept (it has no TTL): a group is
// joined once.
type JoinPolicy int

const (
	// JoinFromStart, the default, starts every group at place 1: under
	// GapWait a later place that arrives first is a gap (ErrGap) and
	// waits until place 1 is applied or closed. A group whose first
	// places never reach the consumer is noticed: it does not go on.
	JoinFromStart JoinPolicy = iota
	// JoinWhereSeen starts a group with no cursor at the first place that
	// arrives: the places before it are passed as GapPass passes a gap
	// (gap_from and gap_to on that message's inbox item, skipped on the
	// cursor, and joined, the place the group started at), and later
	// gaps are handled as Gaps says. It is for a consumer that starts on
	// groups part-way through: a new queue subscribed to an ordered
	// route's topic whose groups began before it, a queue recreated, a
	// queue whose retention dropped a group's first messages. Their
	// places were sent before the queue could keep them and never come,
	// so under JoinFromStart such a group waits for ever.
	//
	// A redriven row (Message.Redriven) keeps its place but may come after
	// its group went past it, so a group it starts is only started on
	// trial: its cursor is marked joining, and until a message sent in
	// its turn moves the cursor, the group's next gap is passed as the
	// first one was (joined moves to the place after it). A redriven dead
	// head of a block route is followed by its successors in turn; a
	// redriven dead letter of a skip route, the new queue's first message
	// of its group, is followed by a place past the ones sent before the
	// queue existed, which never come. The message closing a redriven
	// row's place carries the mark too, and starts a group the same way.
	//
	// The trade-off: a group's first message then goes unchecked, so a
	// missing place 1 (and any place before the first one seen) goes
	// unnoticed for that group, whatever became of it: the consumer
	// queue's redrive policy took it to its dead-letter queue, say, or
	// the consumer never saw it. Such a place, should it come, is late
	// (the Late policy decides). Under GapPass a group with no cursor
	// starts where it is first seen anyway.
	JoinWhereSeen
)

// InboxConfig configures an Inbox.
type InboxConfig struct {
	// Table holds the inbox items and cursors (see CreateTable); it may be
	// the consumer's own table, for its effects to share it.
	Table string
	// Consumer names the consumer: each consumer of the same rows (each
	// queue subscribed to a topic, say) applies each once, under its own
	// name. It may not hold spaces. Give each ordered route's consumer
	// its own name: a group's places count per route.
	Consumer string
	// TTL is how long an inbox item is kept; 0 keeps it forever. Keep it
	// longer than a copy can arrive late: past the queue's retention, and
	// past any redrive of Outflow's dead letters.
	TTL time.Duration
	// Gaps says what Apply does at a gap in an ordered group.
	Gaps GapPolicy
	// Late says what Apply does with a message its group went past.
	Late LatePolicy
	// Join says where Apply starts an ordered group this consumer has no
	// cursor for: at place 1 (JoinFromStart, the default) or at the
	// first place that arrives (JoinWhereSeen).
	Join JoinPolicy
}

// NewInbox returns an Inbox for the consumer. api may be nil for a
// consumer that only uses TransactItems and runs its transactions itself.
func NewInbox(api DynamoDBAPI, cfg InboxConfig) (*Inbox, error) {
	switch {
	case cfg.Table == "":
		return nil, errors.New("inbox: no table")
	case !validConsumer(cfg.Consumer):
		return nil, fmt.Errorf("inbox: consumer name %q must be non-empty, without spaces", cfg.Consumer)
	case cfg.TTL < 0:
		return nil, errors.New("inbox: TTL must not be negative")
	}
	return &Inbox{api: api, table: cfg.Table, consumer: cfg.Consumer, ttl: cfg.TTL, gaps: cfg.Gaps, late: cfg.Late, join: cfg.Join, now: time.Now}, nil
}

// validConsumer reports whether name can be a consumer's name: it is
// part of item keys, whose parts are separated by spaces.
func validConsumer(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n")
}

// Errors the Inbox's methods return.
var (
	// ErrDuplicate is for a message this consumer has applied already:
	// acknowledge it and skip it.
	ErrDuplicate = errors.New("already applied")
	// ErrGap is for a message of an ordered group with an earlier place
	// not yet applied: not its turn. An *OrderError holds the places.
	ErrGap = errors.New("an earlier place of its group is not applied")
	// ErrPassed is for a message of an ordered group that has applied a
	// later place, the message's own never: a copy sent after its group
	// moved on (a dead letter redriven after GapPass passed it). An
	// *OrderError holds the places. The consumer decides: apply it out of
	// order, or set it aside.
	ErrPassed = errors.New("its group has applied a later place")
	// ErrNoGroup is for a message with a place but no group: it was
	// received from a queue not named (FromSQS) without the
	// MessageGroupId system attribute. A queue known to keep no order
	// (FromLambda's event source, FromQueue's URL) gives messages with
	// neither, applied unordered.
	ErrNoGroup = errors.New("an ordered message without its group")
	// ErrLate is for a message its group went past, recorded and not
	// applied (LateRecord): acknowledge it. An *OrderError says where
	// the group was.
	ErrLate = errors.New("recorded late, not applied: its group went past it")
)

// OrderError says why a message of an ordered group was refused.
type OrderError struct {
	Key, Group string
	// Place is the message's place; Cursor the last place the group
	// applied (0: none).
	Place, Cursor int64
	// Joining is set when a redriven row started the group (JoinWhereSeen)
	// and no message sent in its turn has moved its cursor since: a gap
	// is then passed as the gap before a group's first place is.
	Joining bool
}

// Error implements error.
func (e *OrderError) Error() string {
	if e.Gap() {
		return fmt.Sprintf("message %s, place %d of group %s: %v: the group applied up to %d", e.Key, e.Place, e.Group, ErrGap, e.Cursor)
	}
	return fmt.Sprintf("message %s, place %d of group %s: %v (%d)", e.Key, e.Place, e.Group, ErrPassed, e.Cursor)
}

// Unwrap returns ErrGap or ErrPassed.
func (e *OrderError) Unwrap() error {
	if e.Gap() {
		return ErrGap
	}
	return ErrPassed
}

// Gap reports whether places Cursor+1 to Place-1 are missing (Classify
// never refuses a message whose place is Cursor+1); otherwise the group
// has passed the message's place.
func (e *OrderError) Gap() bool { return e.Cursor < e.Place }

// inboxKey and cursorKey are the partition keys of a message's inbox item
// and of its group's cursor. A message closing a place has an inbox item
// of its own, apart from its row's (a key holds no space): the row,
// redriven after its place was closed, is then late, not a duplicate, and
// the Late policy decides.
func (in *Inbox) inboxKey(m Message) string {
	if m.Closed == ClosedRestaged {
		// One per place: the key may come again at another place.
		return fmt.Sprintf("inbox %s %s restaged %s %d", in.consumer, m.Key, m.Group, m.Seq)
	}
	if m.Closed != "" {
		return "inbox " + in.consumer + " " + m.Key + " closed"
	}
	return "inbox " + in.consumer + " " + m.Key
}
func (in *Inbox) cursorKey(m Message) string { return "cursor " + in.consumer + " " + m.Group }
func keyOf(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: &types.AttributeValueMemberS{Value: pk}}
}

// TransactItems returns the items to add to the TransactWriteItems that
// makes the message's effect: first the put of its inbox item, which
// fails if this consumer applied the message already (a record of it as
// late and not applied, TransactItemsRecordLate's, is no application:
// the put replaces it, and only it); then, for a message
// of an ordered group, the update of the group's cursor, which fails
// unless the message's place is the next. Run them with the effect's own
// items and give the error to Classify; Apply does both.
//
// A message that closes a place (m.Closed) has no effect to run: it is
// refused; give it to Close.
func (in *Inbox) TransactItems(m Message) ([]types.TransactWriteItem, error) {
	if m.Closed != "" {
		return nil, fmt.Errorf("inbox: message %s closes place %d of its group and has no effect: give it to Close", m.Key, m.Seq)
	}
	return in.items(m, nil, nil, false)
}

// TransactItemsPast is TransactItems for a message Classify refused for a
// gap, to apply it anyway: its cursor update accepts the place after
// exactly the gap seen, and its inbox item records the places passed. A
// refusal with Cursor 0 is a group with no cursor, and one with Joining
// a group a redriven row started: TransactItemsPast starts it (again) at
// the message's place (see JoinWhereSeen).
func (in *Inbox) TransactItemsPast(m Message, gap *OrderError) ([]types.TransactWriteItem, error) {
	if gap == nil || !gap.Gap() || gap.Place != m.Seq || gap.Key != m.Key {
		return nil, errors.New("inbox: TransactItemsPast needs the message's own gap")
	}
	return in.items(m, gap, nil, false)
}

// TransactItemsLate is TransactItems for a message Classify refused
// because its group went past it (ErrPassed): the put of its inbox item,
// marked late, and no cursor update, so the group's order stays as it
// is. Run it with the effect's items to apply the message late. The item
// stands for the effect: to record the message and apply nothing, use
// TransactItemsRecordLate.
func (in *Inbox) TransactItemsLate(m Message, passed *OrderError) ([]types.TransactWriteItem, error) {
	if passed == nil || passed.Gap() || passed.Place != m.Seq || passed.Key != m.Key {
		return nil, errors.New("inbox: TransactItemsLate needs the message's own refusal as passed")
	}
	return in.items(m, nil, passed, false)
}

// TransactItemsRecordLate is TransactItemsLate for a message to record
// and not apply, as LateRecord does: its inbox item is marked late and
// not applied (applied = false). Run it alone. A copy of the message is
// then a duplicate; but the key, should Outflow stage it again and it
// arrive in its group's turn, is applied there (TransactItems replaces
// the record), since its effect was applied nowhere.
func (in *Inbox) TransactItemsRecordLate(m Message, passed *OrderError) ([]types.TransactWriteItem, error) {
	if passed == nil || passed.Gap() || passed.Place != m.Seq || passed.Key != m.Key {
		return nil, errors.New("inbox: TransactItemsRecordLate needs the message's own refusal as passed")
	}
	return in.items(m, nil, passed, true)
}

// items builds the inbox put and, for an ordered message, the cursor
// update: to the next place, or past gap; for a late message (passed),
// the put alone, marked not applied when record is set.
func (in *Inbox) items(m Message, gap, passed *OrderError, record bool) ([]types.TransactWriteItem, error) {
	if m.Key == "" {
		return nil, errors.New("inbox: a message without a key")
	}
	if m.Ordered() && m.Group == "" {
		return nil, fmt.Errorf("message %s, place %d: %w", m.Key, m.Seq, ErrNoGroup)
	}
	now := in.now()
	item := map[string]types.AttributeValue{
		AttrPK:       &types.AttributeValueMemberS{Value: in.inboxKey(m)},
		attrConsumer: &types.AttributeValueMemberS{Value: in.consumer},
		attrKey:      &types.AttributeValueMemberS{Value: m.Key},
		attrAt:       &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
	}
	if in.ttl > 0 {
		item[AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(in.ttl).Unix(), 10)}
	}
	if m.Ordered() {
		item[attrGroup] = &types.AttributeValueMemberS{Value: m.Group}
		item[attrSeq] = &types.AttributeValueMemberN{Value: strconv.FormatInt(m.Seq, 10)}
	}
	if gap != nil {
		item[attrGapFrom] = &types.AttributeValueMemberN{Value: strconv.FormatInt(gap.Cursor+1, 10)}
		item[attrGapTo] = &types.AttributeValueMemberN{Value: strconv.FormatInt(gap.Place-1, 10)}
	}
	if passed != nil {
		item[attrLateAfter] = &types.AttributeValueMemberN{Value: strconv.FormatInt(passed.Cursor, 10)}
	}
	if m.Closed != "" {
		item[attrClosed] = &types.AttributeValueMemberS{Value: m.Closed}
	}
	put := expression.AttributeNotExists(expression.Name(AttrPK))
	switch {
	case m.Closed != "":
		// A closing message's item is its own: no late record shares it.
	case record:
		item[attrApplied] = &types.AttributeValueMemberBOOL{Value: false}
	default:
		// A late record stands for no effect: a message applied replaces
		// it. Only it: the put still fails on any other item, the one
		// that replaced it included, so two copies apply it once.
		put = put.Or(expression.Name(attrApplied).Equal(expression.Value(false)))
	}
	cond, err := expression.NewBuilder().WithCondition(put).Build()
	if err != nil {
		return nil, fmt.Errorf("inbox: build condition: %w", err)
	}
	items := []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(in.table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values(),
		// The item there tells a copy from the key at another place.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	if !m.Ordered() || passed != nil {
		return items, nil
	}
	after := m.Seq - 1 // the place the cursor must be at
	upd := expression.Set(expression.Name(attrSeq), expression.Value(m.Seq)).
		Set(expression.Name(attrKey), expression.Value(m.Key)).
		Set(expression.Name(attrConsumer), expression.Value(in.consumer)).
		Set(expression.Name(attrGroup), expression.Value(m.Group)).
		Set(expression.Name(attrAt), expression.Value(now.UnixMilli()))
	joining := gap != nil && (gap.Cursor == 0 || gap.Joining)
	if gap != nil {
		after = gap.Cursor
		upd = upd.Add(expression.Name(attrSkipped), expression.Value(gap.Place-gap.Cursor-1))
		if joining {
			// The group starts here: the place it joined at.
			upd = upd.Set(expression.Name(attrJoined), expression.Value(m.Seq))
		}
	}
	switch {
	case !m.Redriven:
		// A message sent in its turn: where the group started holds.
		upd = upd.Remove(expression.Name(attrJoining))
	case in.join == JoinWhereSeen && (after == 0 || joining):
		// A redriven row may be late: the group starts here on trial.
		upd = upd.Set(expression.Name(attrJoining), expression.Value(true))
	}
	next := expression.Name(attrSeq).Equal(expression.Value(after))
	if after == 0 {
		next = expression.AttributeNotExists(expression.Name(AttrPK))
	}
	expr, err := expression.NewBuilder().WithCondition(next).WithUpdate(upd).Build()
	if err != nil {
		return nil, fmt.Errorf("inbox: build cursor update: %w", err)
	}
	return append(items, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(in.table), Key: keyOf(in.cursorKey(m)),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}), nil
}

// Classify reads the outcome of the transaction tx, which holds the
// message's TransactItems: nil if it committed; ErrDuplicate if the
// inbox item refused it (acknowledge and skip); an *OrderError (ErrGap,
// ErrPassed) if the group's cursor did, reading the cursor when the
// refusal does not carry it. Any other error, the effect's own refusals
// included, is returned as it is.
//
// An ordered message whose key this consumer applied at another place
// (Outflow staged the key again: a producer's retry that came after the
// delivered row's retention) is applied once, at its first place: its
// new place is closed as a message closing it would close it
// (ClosedRestaged), so its group goes on, and Classify returns
// ErrDuplicate; or an *OrderError while the place is not its group's
// turn. That write needs the Inbox's DynamoDB client. A key recorded
// late and not applied (TransactItemsRecordLate) was applied nowhere:
// TransactItems's put replaces that record, so the key arriving in its
// turn is applied as any other message.
func (in *Inbox) Classify(ctx context.Context, m Message, tx []types.TransactWriteItem, err error) error {
	var canceled *types.TransactionCanceledException
	if err == nil || !errors.As(err, &canceled) {
		return err
	}
	reasons := canceled.CancellationReasons
	refused := func(pk string) (types.CancellationReason, bool) {
		for i, it := range tx {
			if i >= len(reasons) || aws.ToString(reasons[i].Code) != "ConditionalCheckFailed" {
				continue
			}
			var key map[string]types.AttributeValue
			switch {
			case it.Put != nil && aws.ToString(it.Put.TableName) == in.table:
				key = it.Put.Item
			case it.Update != nil && aws.ToString(it.Update.TableName) == in.table:
				key = it.Update.Key
			}
			if v, ok := key[AttrPK].(*types.AttributeValueMemberS); ok && v.Value == pk {
				return reasons[i], true
			}
		}
		return types.CancellationReason{}, false
	}
	if reason, ok := refused(in.inboxKey(m)); ok {
		if m.Ordered() && m.Closed != ClosedRestaged {
			return in.duplicate(ctx, m, reason.Item)
		}
		return fmt.Errorf("message %s: %w", m.Key, ErrDuplicate)
	}
	if !m.Ordered() {
		return err
	}
	reason, ok := refused(in.cursorKey(m))
	if !ok {
		return err
	}
	item := reason.Item
	cursor, found, cerr := cursorSeq(item)
	if !found && in.api != nil {
		out, gerr := in.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(in.table), Key: keyOf(in.cursorKey(m)), ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return fmt.Errorf("message %s refused by its group's cursor, which could not be read: %w", m.Key, gerr)
		}
		item = out.Item
		cursor, _, cerr = cursorSeq(item)
	}
	if cerr != nil {
		return fmt.Errorf("message %s: %w", m.Key, cerr)
	}
	if cursor == m.Seq-1 {
		// The cursor moved to this message's turn since the transaction
		// was refused: a retry goes through.
		return err
	}
	joining, _ := item[attrJoining].(*types.AttributeValueMemberBOOL)
	return &OrderError{Key: m.Key, Group: m.Group, Place: m.Seq, Cursor: cursor, Joining: joining != nil && joining.Value}
}

// duplicate classifies an ordered message whose inbox item was there,
// old as the refusal carries it (read when it does not): a copy of the
// same place is ErrDuplicate; the key at another place has that place
// closed (see Classify), unless the item there is a late record, which
// stands for no effect.
func (in *Inbox) duplicate(ctx context.Context, m Message, old map[string]types.AttributeValue) error {
	dup := fmt.Errorf("message %s: %w", m.Key, ErrDuplicate)
	if len(old) == 0 && in.api != nil {
		out, err := in.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(in.table), Key: keyOf(in.inboxKey(m)), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("message %s refused by its inbox item, which could not be read: %w", m.Key, err)
		}
		old = out.Item
	}
	if len(old) == 0 {
		return dup // gone since (past its TTL): a copy of what it recorded
	}
	group, _ := old[attrGroup].(*types.AttributeValueMemberS)
	seq, _, err := cursorSeq(old)
	if err != nil {
		seq = 0 // applied with no place
	}
	samePlace := group != nil && group.Value == m.Group && seq == m.Seq
	if applied, ok := old[attrApplied].(*types.AttributeValueMemberBOOL); ok && !applied.Value {
		// Only a put that records a late message fails on a late record
		// (one that applies replaces it): m is late too.
		if samePlace {
			return &recordedCopy{fmt.Sprintf("message %s, place %d of group %s: a copy of a message recorded late and not applied", m.Key, m.Seq, m.Group)}
		}
		return fmt.Errorf("message %s, place %d of group %s: %w (its key is recorded late at place %d already)", m.Key, m.Seq, m.Group, ErrLate, seq)
	}
	if samePlace {
		return dup
	}
	applied := fmt.Sprintf("applied at place %d", seq)
	if _, late := old[attrLateAfter]; late {
		applied = fmt.Sprintf("applied late, at place %d", seq)
	}
	if in.api == nil {
		return fmt.Errorf("message %s, place %d of group %s: its key was %s, and closing this place needs the Inbox's DynamoDB client", m.Key, m.Seq, m.Group, applied)
	}
	closing := m
	closing.Closed = ClosedRestaged
	switch err := in.Apply(ctx, closing); {
	case errors.Is(err, ErrLate):
		return fmt.Errorf("message %s, place %d of group %s: its key was %s, and its group went past this place: %w", m.Key, m.Seq, m.Group, applied, ErrDuplicate)
	case err != nil && !errors.Is(err, ErrDuplicate):
		return err
	}
	return fmt.Errorf("message %s, place %d of group %s: its key was %s; this place is closed (%s): %w", m.Key, m.Seq, m.Group, applied, ClosedRestaged, ErrDuplicate)
}

// recordedCopy is ErrDuplicate for a copy of a message recorded late and
// not applied, in words that do not say it was applied.
type recordedCopy struct{ text string }

func (e *recordedCopy) Error() string { return e.text }
func (e *recordedCopy) Unwrap() error { return ErrDuplicate }

// cursorSeq reads a cursor item's place: found is false for no item.
func cursorSeq(item map[string]types.AttributeValue) (seq int64, found bool, err error) {
	if len(item) == 0 {
		return 0, false, nil
	}
	v, ok := item[attrSeq].(*types.AttributeValueMemberN)
	if ok {
		seq, err = strconv.ParseInt(v.Value, 10, 64)
	}
	if !ok || err != nil {
		return 0, true, errors.New("inbox: a group cursor without a whole-number seq")
	}
	return seq, true, nil
}

// Apply runs, in one transaction, the effect's items and the message's
// TransactItems, and returns Classify's outcome: nil when the effect
// committed, ErrDuplicate when it had already (acknowledge the message),
// an *OrderError (ErrGap) when it is not the group's turn (retry it
// later). With GapPass a gap is passed: the effect commits, and the inbox
// item records the places passed; with JoinWhereSeen so is the gap before
// the first message of a group with no cursor, and the gap after a
// redriven row that started one (see JoinWhereSeen). A message its group went
// past is handled by the Late policy: recorded and not applied (an error
// wrapping ErrLate and the *OrderError; should its key come again in its
// group's turn, it is applied then), or applied without moving the
// cursor (nil).
//
// A message that closes a place (m.Closed) has no effect: the effect's
// items are not written, and the place is recorded as Close does.
func (in *Inbox) Apply(ctx context.Context, m Message, effect ...types.TransactWriteItem) error {
	if in.api == nil {
		return errors.New("inbox: Apply needs a DynamoDB client")
	}
	if m.Closed != "" {
		effect = nil
	}
	items, err := in.items(m, nil, nil, false)
	if err != nil {
		return err
	}
	err = in.run(ctx, m, effect, items)
	var order *OrderError
	if !errors.As(err, &order) {
		return err
	}
	switch {
	case order.Gap() && (in.gaps == GapPass || (in.join == JoinWhereSeen && (order.Cursor == 0 || order.Joining))):
		// Passed, or a group with no cursor (or one a redriven row
		// started) joined where it is seen.
		if items, err = in.TransactItemsPast(m, order); err != nil {
			return err
		}
		return in.run(ctx, m, effect, items)
	case order.Gap():
		return err
	}
	if applied, err := in.appliedBefore(ctx, m); err != nil {
		return err
	} else if applied {
		return fmt.Errorf("message %s, place %d of group %s: %w (its inbox item is gone: past its TTL)", m.Key, m.Seq, m.Group, ErrDuplicate)
	}
	if in.late == LateApply && m.Closed == "" {
		if items, err = in.TransactItemsLate(m, order); err != nil {
			return err
		}
		return in.run(ctx, m, effect, items)
	}
	if items, err = in.TransactItemsRecordLate(m, order); err != nil {
		return err
	}
	if err := in.run(ctx, m, nil, items); err != nil {
		return err
	}
	return fmt.Errorf("%w: %w", ErrLate, order)
}

// appliedBefore reports whether a message its group went past was in
// fact applied in its turn, its inbox item gone since (expired): so a
// copy of it is a duplicate, not a late message. A closing message's
// place was applied if its row's inbox item is there, for that place and
// not a late record (the row arrived first). A row's place, under
// GapWait, moves only by the row itself or by its closing message: with
// no closing record, the row was applied; with JoinWhereSeen, unless the
// place is below the one its group joined at (the cursor's joined),
// passed then. Under GapPass a place may have been passed, and the
// message is late (keep the TTL longer than a copy can come late). It
// costs a strongly consistent read (two for a row with JoinWhereSeen),
// on this path only.
func (in *Inbox) appliedBefore(ctx context.Context, m Message) (bool, error) {
	var key string
	switch {
	case m.Closed != "":
		key = "inbox " + in.consumer + " " + m.Key
	case in.gaps == GapWait:
		key = in.inboxKey(Message{Key: m.Key, Closed: "any"})
	default:
		return false, nil
	}
	out, err := in.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(in.table), Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("message %s: read whether its place was applied: %w", m.Key, err)
	}
	if m.Closed != "" {
		return appliedAt(out.Item, m), nil
	}
	if len(out.Item) > 0 || in.join != JoinWhereSeen {
		return len(out.Item) == 0, nil
	}
	out, err = in.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(in.table), Key: keyOf(in.cursorKey(m)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("message %s: read where its group started: %w", m.Key, err)
	}
	joined, _ := out.Item[attrJoined].(*types.AttributeValueMemberN)
	if joined == nil {
		return true, nil // the group started at place 1
	}
	at, err := strconv.ParseInt(joined.Value, 10, 64)
	if err != nil {
		return false, fmt.Errorf("message %s: its group's cursor has a joined that is no whole number", m.Key)
	}
	return m.Seq >= at, nil
}

// appliedAt reports whether a row's inbox item records its effect at m's
// place: not a late record, and not the key at another place (a restaged
// key). An item without a place records an effect all the same.
func appliedAt(item map[string]types.AttributeValue, m Message) bool {
	if len(item) == 0 {
		return false
	}
	if applied, ok := item[attrApplied].(*types.AttributeValueMemberBOOL); ok && !applied.Value {
		return false
	}
	if _, ordered := item[attrSeq]; !ordered {
		return true
	}
	group, _ := item[attrGroup].(*types.AttributeValueMemberS)
	seq, _, err := cursorSeq(item)
	return err == nil && group != nil && group.Value == m.Group && seq == m.Seq
}

// Close records a message that closes a place (m.Closed): its inbox
// item, marked with the reason, and its group's cursor moved past the
// place, with no effect, so the group's next place is applied in turn.
// A marker is ordered like a row: ErrGap before its turn (GapPass passes
// the gap), ErrDuplicate for a copy, ErrLate once the group went past.
// Give it to Handler.Closed or Poller.Closed.
func (in *Inbox) Close(ctx context.Context, m Message) error {
	if m.Closed == "" {
		return fmt.Errorf("inbox: message %s closes no place: apply it", m.Key)
	}
	return in.Apply(ctx, m)
}

// run writes effect and items in one transaction and classifies the
// outcome.
func (in *Inbox) run(ctx context.Context, m Message, effect, items []types.TransactWriteItem) error {
	tx := append(append(make([]types.TransactWriteItem, 0, len(effect)+len(items)), effect...), items...)
	_, err := in.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	return in.Classify(ctx, m, tx, err)
}
