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

// placedAs is the condition that the stored item has the attributes
// ShardFor reads as row has them, so that the shard computed from row is
// the item's own.
func placedAs(row outbox.Row) expression.ConditionBuilder {
	if ordered(row) {
		return expression.AttributeExists(expression.Name(AttrSeq)).
			And(expression.Name(AttrGroup).Equal(expression.Value(row.Group))).
			And(expression.Name(AttrQueue).Equal(expression.Value(row.Queue)))
	}
	return expression.AttributeNotExists(expression.Name(AttrSeq)).
		Or(expression.AttributeNotExists(expression.Name(AttrGroup)))
}

// placing runs an update that writes a row's shard when only its key is
// known (a redrive, the audit's move). It guesses the row is not ordered,
// the common case, one write; when the item is of an ordered group, the
// refusal carries it (ALL_OLD) and the update is made again with its
// group's shard, under the same condition. cond and upd build afresh for
// each try (a builder shares its operations with every copy).
func (s *Store) placing(ctx context.Context, op, key string, cond func() expression.ConditionBuilder, upd func(shard string) expression.UpdateBuilder) error {
	guess := outbox.Row{Key: key}
	_, err := s.update(ctx, op, key, cond().And(placedAs(guess)), upd(ShardFor(guess, s.cfg.Shards)), types.ReturnValueNone)
	var conflict *outbox.ConflictError
	if !errors.As(err, &conflict) || conflict.Current == nil || !ordered(*conflict.Current) {
		return err
	}
	row := *conflict.Current
	_, err = s.update(ctx, op, key, cond().And(placedAs(row)), upd(ShardFor(row, s.cfg.Shards)), types.ReturnValueNone)
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
