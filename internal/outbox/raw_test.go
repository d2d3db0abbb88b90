package outbox_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// putRaw writes an item by hand into the due index: without a payload, or
// (foreign) with a state the store cannot read.
func putRaw(t *testing.T, h *harness, key string, foreign bool) {
	t.Helper()
	now := strconv.FormatInt(h.clock.Now().UnixMilli()-1000, 10)
	item := map[string]types.AttributeValue{
		dynamo.AttrKey:       &types.AttributeValueMemberS{Value: key},
		dynamo.AttrQueue:     &types.AttributeValueMemberS{Value: "orders"},
		dynamo.AttrShard:     &types.AttributeValueMemberS{Value: dynamo.ShardOf(key, h.store.Shards())},
		dynamo.AttrDueAt:     &types.AttributeValueMemberN{Value: now},
		dynamo.AttrCreatedAt: &types.AttributeValueMemberN{Value: now},
		dynamo.AttrStatus:    &types.AttributeValueMemberS{Value: "pending"},
		dynamo.AttrAttempt:   &types.AttributeValueMemberN{Value: "0"},
	}
	if foreign {
		item[dynamo.AttrStatus] = &types.AttributeValueMemberN{Value: "7"}
	}
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(h.store.Table()), Item: item})
	require.NoError(t, err)
}
