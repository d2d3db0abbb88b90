package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// motoItemLimit is the item size moto refuses past, counted as moto does:
// names plus values, numbers as their text.
const motoItemLimit = 405_000

// putSized writes a due pending row by hand whose item, as moto counts it,
// is size bytes: a producer in another language that never heard of the
// room Outflow's delivery state needs.
func putSized(t *testing.T, h *harness, key, queue string, size int) {
	t.Helper()
	now := strconv.FormatInt(h.clock.Now().UnixMilli()-1000, 10)
	item := map[string]types.AttributeValue{
		dynamo.AttrKey:       &types.AttributeValueMemberS{Value: key},
		dynamo.AttrQueue:     &types.AttributeValueMemberS{Value: queue},
		dynamo.AttrShard:     &types.AttributeValueMemberS{Value: dynamo.ShardOf(key, h.store.Shards())},
		dynamo.AttrDueAt:     &types.AttributeValueMemberN{Value: now},
		dynamo.AttrCreatedAt: &types.AttributeValueMemberN{Value: now},
		dynamo.AttrStatus:    &types.AttributeValueMemberS{Value: "pending"},
		dynamo.AttrAttempt:   &types.AttributeValueMemberN{Value: "0"},
	}
	used := len(dynamo.AttrPayload)
	for name, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			used += len(name) + len(v.Value)
		case *types.AttributeValueMemberN:
			used += len(name) + len(v.Value)
		}
	}
	item[dynamo.AttrPayload] = &types.AttributeValueMemberS{Value: strings.Repeat("x", size-used)}
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(h.store.Table()), Item: item})
	require.NoError(t, err)
}

func TestSweep_DeadLettersARawItemTooLargeToClaim(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 2, "")...)
	// The claim's token, lease and claim time take it past the limit.
	putSized(t, h, "huge", "orders", motoItemLimit-60)
	// This one cannot even take the dead-letter keys: it leaves the due
	// index as failed, and the error names it.
	putSized(t, h, "brim", "orders", motoItemLimit-5)

	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, res.Delivered, "the others go on")
	require.Equal(t, 2, res.DeadLettered, "%+v", res)
	got := h.row(t, "huge")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, "item too large: claim", got.LastError)
	require.Equal(t, 0, got.Attempt, "never claimed")
	require.Equal(t, outbox.StatusFailed, h.row(t, "brim").Status)

	res, err = h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Claimed+res.Errors+res.Conflicts, "nothing left to refuse: %+v", res)
}

func TestSweep_DeadLettersARawItemWithNoRoomForItsHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// The claim fits; the dead letter's history and keys would not.
	putSized(t, h, "big", "nowhere", motoItemLimit-200)

	res, err := h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLettered, "%+v", res)
	got := h.row(t, "big")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Contains(t, got.LastError, "item too large")

	res, err = h.engine(t, testPolicy(), nil).Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Claimed+res.Errors+res.Conflicts, "nothing left to refuse: %+v", res)
}

func TestSweep_BoundsStoredErrorMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 1, "")...)
	long := strings.Repeat("é", 3000) // 6000 bytes, two to a character
	flaky := faults.Refuse{Next: h.sqs, Fail: func(outbox.Row) error { return errors.New(long) }}
	p := testPolicy()
	p.MaxAttempts = 1
	res, err := h.engine(t, p, flaky).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLettered)
	got := h.row(t, "orders-0")
	require.LessOrEqual(t, len(got.LastError), outbox.MaxErrorBytes)
	require.Len(t, got.Errors, 1)
	require.LessOrEqual(t, len(got.Errors[0].Message), outbox.MaxErrorBytes)
	require.True(t, strings.HasPrefix(long, strings.TrimSuffix(got.LastError, "…")), "cut at a character boundary")
}

func TestDeliverKeys_ReportsDeadlineWhenTheMarginStoppedIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.stage(t, rowsFor("orders", 3, "")...)
	p := testPolicy()
	p.DeadlineMargin = 10 * time.Second
	// A wake with less time left than its margin: it may claim nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := h.engine(t, p, nil).DeliverKeys(ctx, []string{"orders-0", "orders-1", "orders-2"})
	require.NoError(t, err)
	require.Zero(t, res.Claimed)
	require.Equal(t, "deadline", res.Stopped, "not drained: the rows are still due")
}
