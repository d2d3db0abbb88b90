package dynamo

import (
	"context"
	"errors"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// ShardOf is the due-index partition of a key among n shards: FNV-1a of the
// key, mod n, as a decimal string. Shard counts may grow (old rows stay on
// the lower shards, which are still swept) but must never shrink.
func ShardOf(key string, n int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return strconv.Itoa(int(h.Sum32() % uint32(n)))
}

// ShardFor is the due-index shard of a row among n shards. A row of an
// ordered group (one with a place, seq, and a group) goes to its group's
// shard, ShardOf its group item's key, so a group's rows all live in one
// shard and so in one sweep partition (outbox.Partition): the sweep that
// delivers a row also holds its successor, and drains a hot group in one
// run instead of one row per scheduled sweep. Any other row goes to its
// key's shard, which spreads the index's writes evenly.
func ShardFor(row outbox.Row, n int) string {
	if ordered(row) {
		return ShardOf(GroupKey(row.Queue, row.Group), n)
	}
	return ShardOf(row.Key, n)
}

func ordered(row outbox.Row) bool { return row.Seq > 0 && row.Group != "" }

// unordered is the condition that the stored item is not of an ordered
// group as ShardFor reads one, so its shard is its key's: it has no seq or
// no group.
func unordered() expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(AttrSeq)).
		Or(expression.AttributeNotExists(expression.Name(AttrGroup)))
}

// placementOf reads what ShardFor needs of a stored item, however a
// producer wrote it (a seq that is not a whole number, a group that is not
// a string: such a row is not ordered, and goes to its key's shard), and
// the condition that the item still holds exactly those attributes.
func placementOf(key string, item map[string]types.AttributeValue) (outbox.Row, expression.ConditionBuilder) {
	row := outbox.Row{Key: key}
	if seq, ok := wholeNumber(item, AttrSeq); ok {
		row.Seq = seq
	}
	if v, ok := item[AttrGroup].(*types.AttributeValueMemberS); ok {
		row.Group = v.Value
	}
	if v, ok := item[AttrQueue].(*types.AttributeValueMemberS); ok {
		row.Queue = v.Value
	}
	var same []expression.ConditionBuilder
	for _, name := range []string{AttrSeq, AttrGroup, AttrQueue} {
		c := expression.AttributeNotExists(expression.Name(name))
		if v, ok := item[name]; ok {
			c = expression.Name(name).Equal(expression.Value(rawValue{v}))
		}
		same = append(same, c)
	}
	return row, same[0].And(same[1], same[2])
}

// placing runs an update that writes a row's shard when only its key is
// known (a redrive, the audit's move). It guesses the row is not ordered,
// the common case: one write. When the item has a seq and a group, the
// refusal carries it (ALL_OLD), and the update is made again with the
// shard ShardFor gives the item as stored, on condition that its seq,
// group and queue are still those. cond and upd build afresh for each try
// (a builder shares its operations with every copy).
func (s *Store) placing(ctx context.Context, op, key string, cond func() expression.ConditionBuilder, upd func(shard string) expression.UpdateBuilder) error {
	_, err := s.updateRaw(ctx, op, key, cond().And(unordered()), upd(ShardOf(key, s.cfg.Shards)), types.ReturnValueNone)
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || ccf.Item == nil || ccf.Item[AttrSeq] == nil || ccf.Item[AttrGroup] == nil {
		// Done, failed, gone, or refused by cond itself.
		return s.wrap(op, key, err)
	}
	row, same := placementOf(key, ccf.Item)
	_, err = s.update(ctx, op, key, cond().And(same), upd(ShardFor(row, s.cfg.Shards)), types.ReturnValueNone)
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
