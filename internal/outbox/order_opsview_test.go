package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Review 12c: operators are told a group is not blocked while the engine
// blocks it.
//
// docs/reliability.md: "A row whose place is unknown blocks its group under
// either policy": a dead letter whose prev is not a string (a producer in
// another language wrote it) holds its successors even under skip, until
// it is purged. The engine does that (Link.Malformed never settles, and
// the sweep reports BlockedGroups 1). But outbox.DeadLetterBlocks, "the
// rule the head check applies ... so operators see what the engine does",
// which `outflow stats` and `outflow dead list/show` use, knows only the
// route's policy and the seq: under skip it says the dead letter blocks
// nothing. `outflow stats` shows 0 blocked groups, `dead list` does not
// mark the row, and an operator following the docs ("skip: the group
// moves on") has no reason to purge it, while the group waits for ever.
//
// Violated: invariant 2 (wrong BlockedGroups count: the operator's view
// disagrees with the engine's). Expected: Stats with DeadLetterBlocks
// counts the group as the sweep does. Suggested fix: have WithGroups read
// prev too and mark a dead letter whose prev or seq cannot be read as
// malformed, and DeadLetterBlocks take it (block under either policy).
func TestOrdered_OperatorsSeeTheGroupAMalformedDeadHeadBlocksUnderSkip(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	k := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
	// The second row's prev, as a producer in another language wrote it.
	h.setRaw(t, k[1], dynamo.AttrPrev, &types.AttributeValueMemberN{Value: "1"})
	policy := orderedPolicy(outbox.DeadHeadSkip)
	e := h.engine(t, policy, nil)
	var (
		res outbox.Result
		err error
	)
	for range 2 {
		res, err = e.Sweep(ctx)
		require.NoError(t, err)
		h.clock.Advance(time.Minute)
	}
	require.Equal(t, 1, res.BlockedGroups, "the engine holds the group behind the malformed dead letter, under skip")
	require.Equal(t, outbox.StatusPending, h.row(t, k[2]).Status)

	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	st, err := op.Stats(ctx, h.clock.Now(), func(d dynamo.DeadRef) bool {
		return outbox.DeadLetterBlocks(policy.Ordered, d.Link())
	})
	require.NoError(t, err)
	require.Equal(t, 1, st.BlockedGroups, "outflow stats must count the group the engine blocks")
}
