package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// An ordered group (queue, group) is a chain: each row names its
// predecessor (prev) and its place (seq), and one group item holds the
// chain's tail. Staging appends to the chain in one transaction with the
// tail as its condition, so DynamoDB serialises the producers of a group
// and the chain has no gaps and no forks, whatever their clocks say.

// GroupKey is the key of an ordered group's item. It starts with "group "
// and holds spaces, which a row key never does, so it never names a row.
func GroupKey(queue, group string) string { return "group " + queue + " " + group }

// Tail is the last row staged in an ordered group: none (Seq 0) before the
// first.
type Tail struct {
	Key string
	Seq int64
}

// GroupTail reads an ordered group's tail with a strongly consistent read.
func (s *Store) GroupTail(ctx context.Context, queue, group string) (Tail, error) {
	key := GroupKey(queue, group)
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Tail{}, fmt.Errorf("read tail of %s: %w", key, err)
	}
	if len(out.Item) == 0 {
		return Tail{}, nil
	}
	tail, ok := out.Item[AttrTail].(*types.AttributeValueMemberS)
	var n int64
	if seq, isNum := out.Item[AttrSeq].(*types.AttributeValueMemberN); isNum {
		n, err = strconv.ParseInt(seq.Value, 10, 64)
	}
	if !ok || err != nil || n < 1 {
		return Tail{}, fmt.Errorf("%w: group item %q needs a string %s and a positive whole %s", ErrMalformed, key, AttrTail, AttrSeq)
	}
	return Tail{Key: tail.Value, Seq: n}, nil
}

// StageOrderedItems is the transaction that stages row as the successor
// of tail: the row's conditional put (index 0) and the group item's update
// (index 1), which fails if another row was staged in the group since
// tail was read. Both return the item as it was when their condition
// fails.
func (s *Store) StageOrderedItems(row outbox.Row, now time.Time, tail Tail) ([]types.TransactWriteItem, error) {
	return s.StageChainItems([]outbox.Row{row}, now, tail)
}

// StageChainItems is the transaction that stages rows, all of one ordered
// group, as a chain after tail in the order given: each row's conditional
// put (index i for rows[i]), the first naming tail as its predecessor and
// each later one the row before it, with consecutive seqs; then one update
// of the group item to the last row (the last index), on the same
// condition as a single row's, so it fails if another row was staged in
// the group since tail was read. A transaction may touch an item once, so
// the group item moves once, straight to the chain's new tail. Every item
// returns the item as it was when its condition fails.
func (s *Store) StageChainItems(rows []outbox.Row, now time.Time, tail Tail) ([]types.TransactWriteItem, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	first := rows[0]
	items := make([]types.TransactWriteItem, 0, len(rows)+1)
	prev, seq := tail.Key, tail.Seq
	var table *string
	for i, row := range rows {
		if row.Group == "" {
			return nil, fmt.Errorf("ordered row %s: %w", row.Key, errNoGroup)
		}
		if row.Queue != first.Queue || row.Group != first.Group {
			return nil, fmt.Errorf("ordered row %s: %w: group %q of %s, the chain is group %q of %s", row.Key, errOtherGroup, row.Group, row.Queue, first.Group, first.Queue)
		}
		for _, earlier := range rows[:i] {
			if earlier.Key == row.Key {
				// DynamoDB refuses a transaction that writes an item twice,
				// and a row cannot be its own successor.
				return nil, fmt.Errorf("ordered row %s: %w", row.Key, errKeyTwice)
			}
		}
		seq++
		row.Seq, row.Prev = seq, prev
		in, err := s.StageInput(row, now)
		if err != nil {
			return nil, err
		}
		table = in.TableName
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName: in.TableName, Item: in.Item,
			ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
		prev = row.Key
	}
	cond := expression.AttributeNotExists(expression.Name(AttrKey))
	if tail.Seq > 0 {
		cond = expression.Name(AttrSeq).Equal(expression.Value(tail.Seq))
	}
	upd := expression.Set(expression.Name(AttrTail), expression.Value(prev)).
		Set(expression.Name(AttrSeq), expression.Value(seq))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return nil, fmt.Errorf("build group update: %w", err)
	}
	return append(items, types.TransactWriteItem{Update: &types.Update{
		TableName: table, Key: keyOf(GroupKey(first.Queue, first.Group)),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}), nil
}

var (
	errNoGroup    = errors.New("an ordered row needs a message group")
	errOtherGroup = errors.New("a chain is staged into one group")
	errKeyTwice   = errors.New("key given twice in one chain")
)

// ErrGroupRace is returned when other producers kept staging into the
// same ordered group between each read of its tail and the write, more
// times than StageOrdered tries.
var ErrGroupRace = errors.New("other producers kept staging into the ordered group first")

// groupTries bounds StageOrdered's tries against racing producers.
const groupTries = 20

// StageOrdered stages row at the end of its ordered group: it reads the
// tail, then writes the row and the new tail in one transaction. When
// another producer wins the race it reads the tail again and retries. A
// key already staged gives a *outbox.ConflictError holding the row.
func (s *Store) StageOrdered(ctx context.Context, row outbox.Row, now time.Time) error {
	for try := range groupTries {
		tail, err := s.GroupTail(ctx, row.Queue, row.Group)
		if err != nil {
			return err
		}
		items, err := s.StageOrderedItems(row, now, tail)
		if err != nil {
			return err
		}
		_, err = s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			return fmt.Errorf("stage %s: %w", row.Key, err)
		}
		reasons := canceled.CancellationReasons
		if len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
			// The key is staged already. The reason may carry the item;
			// if not, read it, so an identical row reads as staged.
			conflict := &outbox.ConflictError{Key: row.Key, Op: "stage"}
			item := reasons[0].Item
			if len(item) == 0 {
				if out, gerr := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.cfg.Table), Key: keyOf(row.Key), ConsistentRead: aws.Bool(true)}); gerr == nil {
					item = out.Item
				}
			}
			if cur, derr := Decode(item); len(item) > 0 && (derr == nil || cur.Key != "") {
				conflict.Current = &cur
			}
			return conflict
		}
		// The group item moved (another producer staged first) or another
		// transaction held it: read the tail again, after a short pause
		// that spreads racing producers apart.
		if try < groupTries-1 {
			select {
			case <-time.After(time.Duration(1+rand.IntN(10<<min(try, 4))) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return fmt.Errorf("stage %s in group %q of %s: %w", row.Key, row.Group, row.Queue, ErrGroupRace)
}

// Link implements outbox.Store: one strongly consistent read of the
// fields the head check needs. A field of the wrong type reads as absent,
// except prev and seq, which make the link Malformed; an unknown status
// counts as a dead head.
func (s *Store) Link(ctx context.Context, key string) (outbox.Link, error) {
	names := map[string]string{"#k": AttrKey, "#s": AttrStatus, "#q": AttrQueue, "#p": AttrPrev, "#f": AttrFailedAt, "#a": AttrAttempt, "#n": AttrSeq, "#d": AttrDueAt, "#u": AttrUnsureAt, "#c": AttrClosed, "#g": AttrGroup}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: keyOf(key), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#k, #s, #q, #p, #f, #a, #n, #d, #u, #c, #g"), ExpressionAttributeNames: names,
	})
	if err != nil {
		return outbox.Link{}, fmt.Errorf("link %s: %w", key, err)
	}
	if len(out.Item) == 0 {
		return outbox.Link{}, nil
	}
	str := func(name string) string {
		if v, ok := out.Item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	l := outbox.Link{Found: true, Status: outbox.Status(str(AttrStatus)), Queue: str(AttrQueue), Group: str(AttrGroup), Closed: str(AttrClosed)}
	l.Prev, l.Seq, l.Malformed = readLink(out.Item)
	if n, ok := wholeNumber(out.Item, AttrDueAt); ok {
		l.DueAt = fromMs(n)
	}
	if v, ok := out.Item[AttrAttempt].(*types.AttributeValueMemberN); ok {
		l.Attempt, _ = strconv.Atoi(v.Value)
	}
	if n, ok := wholeNumber(out.Item, AttrFailedAt); ok {
		l.FailedAt = fromMs(n)
	}
	// A value that is not a time counts as now: a stray value must not
	// let a group pass a head that may still land.
	if _, ok := out.Item[AttrUnsureAt]; ok {
		l.UnsureAt = time.Now()
		if t, ok := wholeNumber(out.Item, AttrUnsureAt); ok {
			l.UnsureAt = fromMs(t)
		}
	}
	return l, nil
}

// readLink reads a row's place in its ordered group: its predecessor's key
// (prev, a string) and its place (seq, a whole number), each absent for a
// row in no group. malformed says what is wrong if either cannot be read.
func readLink(av map[string]types.AttributeValue) (prev string, seq int64, malformed string) {
	if v, ok := av[AttrSeq]; ok {
		n, isNum := v.(*types.AttributeValueMemberN)
		var err error
		if isNum {
			seq, err = strconv.ParseInt(n.Value, 10, 64)
		}
		if !isNum || err != nil || seq < 0 {
			seq, malformed = 0, fmt.Sprintf("%s must be a whole number, got %s", AttrSeq, typeName(v))
		}
	}
	if v, ok := av[AttrPrev]; ok {
		s, isStr := v.(*types.AttributeValueMemberS)
		if !isStr {
			return "", seq, fmt.Sprintf("%s must be a string, got %s", AttrPrev, typeName(v))
		}
		prev = s.Value
	}
	return prev, seq, malformed
}
