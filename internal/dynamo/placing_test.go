package dynamo_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
)

// placementShapes are items a producer in another language may write: a
// seq and a group that ShardFor does not read as an ordered row (seq not a
// positive whole number, group not a non-empty string), or an ordered row
// with no readable queue or attempt. The unordered guess of placing
// refuses each; the second write must still place it, by the item as
// stored (review 17a found them stranded on a stray shard, and their
// redrives refused, when the second write went by the decoded row).
var placementShapes = []struct {
	name   string
	mutate func(map[string]types.AttributeValue)
}{
	{"control: unordered", func(map[string]types.AttributeValue) {}},
	{"control: ordered", func(it map[string]types.AttributeValue) { it["seq"], it["group"] = n(1), s("g") }},
	{"seq 0 with a group", func(it map[string]types.AttributeValue) { it["seq"], it["group"] = n(0), s("g") }},
	{"seq negative with a group", func(it map[string]types.AttributeValue) { it["seq"], it["group"] = n(-1), s("g") }},
	{"seq a string with a group", func(it map[string]types.AttributeValue) { it["seq"], it["group"] = s("1"), s("g") }},
	{"seq a fraction with a group", func(it map[string]types.AttributeValue) {
		it["seq"], it["group"] = &types.AttributeValueMemberN{Value: "1.5"}, s("g")
	}},
	{"seq past int64 with a group", func(it map[string]types.AttributeValue) {
		it["seq"], it["group"] = &types.AttributeValueMemberN{Value: "99999999999999999999"}, s("g")
	}},
	{"group empty with a seq", func(it map[string]types.AttributeValue) { it["seq"], it["group"] = n(1), s("") }},
	{"group a number with a seq", func(it map[string]types.AttributeValue) { it["seq"], it["group"] = n(1), n(7) }},
	{"ordered, attempt unreadable", func(it map[string]types.AttributeValue) {
		it["seq"], it["group"], it["attempt"] = n(1), s("g"), s("x")
	}},
	{"ordered, queue missing", func(it map[string]types.AttributeValue) {
		it["seq"], it["group"] = n(1), s("g")
		delete(it, "queue")
	}},
}

// Invariant: the stray-row audit still moves every stray row onto a shard
// the sweep queries (the sweep's claim then quarantines it if it is
// malformed); a row it leaves on a stray shard waits for ever, uncounted.
func TestAudit_MovesAStrayRowToASweptShardWhateverItsSeqAndGroup(t *testing.T) {
	t.Parallel()
	for _, tt := range placementShapes {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, a, _ := newAudit(t, 1, 100)
			putItem(t, st, "stray", func(it map[string]types.AttributeValue) {
				it["shard"] = s("9")
				tt.mutate(it)
			})
			res, err := a.Run(ctx, t0)
			require.NoError(t, err)
			shard := shardOfItem(t, st, "stray")
			sh, err := strconv.Atoi(shard)
			require.True(t, err == nil && sh >= 0 && sh < st.Shards(),
				"moved to a swept shard: still on %q; the audit reported %+v (moved %d)", shard, res.Found, res.Moved)
			require.Equal(t, 1, res.Moved, "%+v", res.Found)
			// And no later run finds it again: it is not stranded.
			res, err = a.Run(ctx, t0)
			require.NoError(t, err)
			require.Empty(t, res.Found, "%+v", res.Found)
		})
	}
}

// Invariant: a redrive of a failed row puts it back in the due index; it
// refuses only a row that is not failed. Here every row is failed.
func TestRedrive_TakesAFailedRowWhateverItsSeqAndGroup(t *testing.T) {
	t.Parallel()
	for _, tt := range placementShapes {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := newStore(t, 0)
			putItem(t, st, "dead", func(it map[string]types.AttributeValue) {
				it["status"], it["attempt"] = s("failed"), n(3)
				it["failed_at"], it["dead_queue"] = n(t0.UnixMilli()), s("orders")
				delete(it, "shard")
				delete(it, "due_at")
				tt.mutate(it)
			})
			require.NoError(t, st.Redrive(ctx, "dead", t0), "the row is failed: a redrive must take it")
			sh, err := strconv.Atoi(shardOfItem(t, st, "dead"))
			require.NoError(t, err)
			require.True(t, sh >= 0 && sh < st.Shards())
			require.Contains(t, awstest.DueKeys(t, st, t0), "dead")
		})
	}
}
