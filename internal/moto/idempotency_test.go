package moto_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// putOnce is a transaction that puts pk with value v, only where pk is new.
func putOnce(table, pk, v string) *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
		TableName:           aws.String(table),
		Item:                item(pk, map[string]types.AttributeValue{"v": &types.AttributeValueMemberS{Value: v}}),
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}}}
}

// TestTransactWriteItems_ARepeatUnderOneClientRequestTokenSucceedsWithoutWriting
// checks the server takes a ClientRequestToken as DynamoDB does: a repeat
// of a call that succeeded succeeds without writing again, the token with
// other items is refused, and another token is a new call.
func TestTransactWriteItems_ARepeatUnderOneClientRequestTokenSucceedsWithoutWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, table := awstest.DynamoDB(t), awstest.NewTable(t)
	token := awstest.UniqueName("token")
	withToken := func(in *dynamodb.TransactWriteItemsInput, token string) *dynamodb.TransactWriteItemsInput {
		in.ClientRequestToken = aws.String(token)
		return in
	}

	_, err := client.TransactWriteItems(ctx, withToken(putOnce(table, "k", "first"), token))
	require.NoError(t, err)
	_, err = client.TransactWriteItems(ctx, withToken(putOnce(table, "k", "first"), token))
	require.NoError(t, err, "the same call again: DynamoDB answers as it did, without writing")

	_, err = client.TransactWriteItems(ctx, withToken(putOnce(table, "k", "other"), token))
	var mismatch *types.IdempotentParameterMismatchException
	require.ErrorAs(t, err, &mismatch, "the token with other items")

	_, err = client.TransactWriteItems(ctx, withToken(putOnce(table, "k", "first"), token+"-2"))
	var cancelled *types.TransactionCanceledException
	require.ErrorAs(t, err, &cancelled, "another token is a new call, and the key is taken")

	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item("k", nil), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, "first", got.Item["v"].(*types.AttributeValueMemberS).Value)
}

// TestTransactWriteItems_TheSDKsRetryOfATransactionWhoseAnswerWasLostSucceeds
// is the case the token is for: the SDK's retry of a conditional
// transaction that was applied succeeds, as on DynamoDB, instead of
// failing on its own condition (the 20,000-row soak's staging stopped on
// that before the server honoured the token).
func TestTransactWriteItems_TheSDKsRetryOfATransactionWhoseAnswerWasLostSucceeds(t *testing.T) {
	t.Parallel()
	cfg := awstest.TestConfig(t)
	transport := awstest.LoseFirstAnswer("TransactWriteItems")
	cfg.HTTPClient = sdkhttp.Client(&http.Client{Transport: transport})
	client, table := dynamodb.NewFromConfig(cfg), awstest.NewTable(t)

	_, err := client.TransactWriteItems(context.Background(), putOnce(table, "k", "v"))
	require.NoError(t, err)
	require.True(t, transport.Lost(), "the first answer was lost, and the SDK sent the call again")
}
