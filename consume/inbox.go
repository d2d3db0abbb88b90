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
	// inbox item, marked late with the place its group had reached, and
	// Apply returns an error wrapping ErrLate, which Handler and Poller
	// acknowledge. The group's order is never broken; find late
	// messages by their inbox items' late_after.
	LateRecord LatePolicy = iota
	// LateApply applies the effect out of order, with the message's
	// inbox item marked late, and leaves the group's cursor where it is.
	// Choose it where the effect does not depend on the group's order.
	LateApply
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
	return &Inbox{api: api, table: cfg.Table, consumer: cfg.Consumer, ttl: cfg.TTL, gaps: cfg.Gaps, late: cfg.Late, now: time.Now}, nil
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
// fails if this consumer applied the message already; then, for a message
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
	return in.items(m, nil, nil)
}

// TransactItemsPast is TransactItems for a message Classify refused for a
// gap, to apply it anyway: its cursor update accepts the place after
// exactly the gap seen, and its inbox item records the places passed.
func (in *Inbox) TransactItemsPast(m Message, gap *OrderError) ([]types.TransactWriteItem, error) {
	if gap == nil || !gap.Gap() || gap.Place != m.Seq || gap.Key != m.Key {
		return nil, errors.New("inbox: TransactItemsPast needs the message's own gap")
	}
	return in.items(m, gap, nil)
}

// TransactItemsLate is TransactItems for a message Classify refused
// because its group went past it (ErrPassed): the put of its inbox item,
// marked late, and no cursor update, so the group's order stays as it
// is. Run it with the effect's items to apply the message late, or alone
// to record it and apply nothing.
func (in *Inbox) TransactItemsLate(m Message, passed *OrderError) ([]types.TransactWriteItem, error) {
	if passed == nil || passed.Gap() || passed.Place != m.Seq || passed.Key != m.Key {
		return nil, errors.New("inbox: TransactItemsLate needs the message's own refusal as passed")
	}
	return in.items(m, nil, passed)
}

// items builds the inbox put and, for an ordered message, the cursor
// update: to the next place, or past gap; for a late message (passed),
// the put alone.
func (in *Inbox) items(m Message, gap, passed *OrderError) ([]types.TransactWriteItem, error) {
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
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
	if err != nil {
		return nil, fmt.Errorf("inbox: build condition: %w", err)
	}
	items := []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(in.table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
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
	if gap != nil {
		after = gap.Cursor
		upd = upd.Add(expression.Name(attrSkipped), expression.Value(gap.Place-gap.Cursor-1))
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
// turn. That write needs the Inbox's DynamoDB client.
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
	cursor, found, cerr := cursorSeq(reason.Item)
	if !found && in.api != nil {
		out, gerr := in.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(in.table), Key: keyOf(in.cursorKey(m)), ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return fmt.Errorf("message %s refused by its group's cursor, which could not be read: %w", m.Key, gerr)
		}
		cursor, _, cerr = cursorSeq(out.Item)
	}
	if cerr != nil {
		return fmt.Errorf("message %s: %w", m.Key, cerr)
	}
	if cursor == m.Seq-1 {
		// The cursor moved to this message's turn since the transaction
		// was refused: a retry goes through.
		return err
	}
	return &OrderError{Key: m.Key, Group: m.Group, Place: m.Seq, Cursor: cursor}
}

// duplicate classifies an ordered message whose inbox item was there,
// old as the refusal carries it (read when it does not): a copy of the
// same place is ErrDuplicate; the key at another place has that place
// closed (see Classify).
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
	if group != nil && group.Value == m.Group && seq == m.Seq {
		return dup
	}
	if in.api == nil {
		return fmt.Errorf("message %s, place %d of group %s: its key was applied at place %d, and closing this place needs the Inbox's DynamoDB client", m.Key, m.Seq, m.Group, seq)
	}
	closing := m
	closing.Closed = ClosedRestaged
	if err := in.Apply(ctx, closing); err != nil && !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrLate) {
		return err
	}
	return fmt.Errorf("message %s, place %d of group %s: its key was applied at place %d; this place is closed (%s): %w", m.Key, m.Seq, m.Group, seq, ClosedRestaged, ErrDuplicate)
}

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
// item records the places passed. A message its group went past is
// handled by the Late policy: recorded and not applied (an error
// wrapping ErrLate and the *OrderError), or applied without moving the
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
	items, err := in.items(m, nil, nil)
	if err != nil {
		return err
	}
	err = in.run(ctx, m, effect, items)
	var order *OrderError
	if !errors.As(err, &order) {
		return err
	}
	switch {
	case order.Gap() && in.gaps == GapPass:
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
	if items, err = in.TransactItemsLate(m, order); err != nil {
		return err
	}
	if in.late == LateApply && m.Closed == "" {
		return in.run(ctx, m, effect, items)
	}
	if err := in.run(ctx, m, nil, items); err != nil {
		return err
	}
	return fmt.Errorf("%w: %w", ErrLate, order)
}

// appliedBefore reports whether a message its group went past was in
// fact applied in its turn, its inbox item gone since (expired): so a
// copy of it is a duplicate, not a late message. A closing message's
// place was applied if its row's inbox item is there (the row arrived
// first). A row's place, under GapWait, moves only by the row itself or
// by its closing message: with no closing record, the row was applied.
// Under GapPass a place may have been passed, and the message is late
// (keep the TTL longer than a copy can come late). It costs a strongly
// consistent read, on this path only.
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
		return len(out.Item) > 0, nil
	}
	return len(out.Item) == 0, nil
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
