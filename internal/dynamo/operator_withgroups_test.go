package dynamo_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// Review 12c: a dead letter whose seq cannot be read flickers in and out
// of the operator's view.
//
// WithGroups reads status, group and seq of each FIFO dead letter with
// attributevalue.UnmarshalMap into a struct, "best effort: a malformed seq
// reads as none". But UnmarshalMap walks the item's attributes in Go's
// random map order and returns at the first that does not decode: when
// seq (a string here, as a producer in another language may write it) is
// met before status, status stays empty and the dead letter is left out
// as "no longer a dead letter". So `outflow dead list` (and stats, which
// counts blocked groups from the same list) shows the row on some calls
// and not on others; when it is shown, its seq reads 0, so it is never
// marked as blocking, although the engine holds its group behind it under
// either policy (Link.Malformed never settles).
//
// Violated: invariant 2 (operators' view of a blocking dead head is
// wrong, and not even stable). Expected: the dead letter is listed on every
// call. Suggested fix: read the three attributes one by one (as readLink
// does), keep the row when its status reads failed, and carry "place
// unknown" so DeadLetterBlocks marks it as blocking.
func TestOperator_WithGroupsKeepsADeadLetterWhoseSeqIsMalformed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := awstest.NewTable(t)
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	s := op.Store
	require.NoError(t, s.StageOrdered(ctx, orderedRow("a1", "a"), t0))
	deadAt(t, s, "a1", t0)
	_, err = awstest.DynamoDB(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: "a1"}},
		UpdateExpression:          aws.String("SET #n = :s"),
		ExpressionAttributeNames:  map[string]string{"#n": dynamo.AttrSeq},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "one"}},
	})
	require.NoError(t, err)
	refs, err := op.ListDead(ctx, dynamo.DeadQuery{}, 0)
	require.NoError(t, err)
	require.Len(t, refs, 1)
	missing := 0
	for range 30 {
		got, err := op.WithGroups(ctx, refs)
		require.NoError(t, err)
		if len(got) == 0 {
			missing++
		}
	}
	require.Zero(t, missing, "the dead letter a1 was left out of %d of 30 listings", missing)
}
