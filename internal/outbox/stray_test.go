package outbox_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// An ordered group whose head a producer wrote on a shard the sweep never
// queries (here "9" of 4): the head is never claimed, so the rest of the
// group waits behind it. Once the audit moves the head to its key's
// shard, the group goes, in order: the head check reads a predecessor by
// key, not by shard.
func TestSweep_DeliversAnOrderedGroupInOrderOnceTheAuditMovesItsStrayHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 4)["g"]
	h.setRaw(t, keys[0], dynamo.AttrShard, &types.AttributeValueMemberS{Value: "9"})
	log := &sendLog{next: h.sqs}

	res, err := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log).Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Delivered, "the stray head is never swept, and its group waits: %+v", res)

	a, err := dynamo.NewAudit(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: h.store.Shards()})
	require.NoError(t, err)
	ar, err := a.Run(ctx, h.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 1, ar.Moved, "%+v", ar.Found)
	require.Equal(t, keys[0], ar.Found[0].Key)

	res, err = h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, res.Delivered, "%+v", res)
	require.Equal(t, map[string][]string{"g": keys}, log.accepted())
	log.oneInFlight(t)
}
