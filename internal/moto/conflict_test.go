package moto_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/moto"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func item(pk string, more map[string]types.AttributeValue) map[string]types.AttributeValue {
	av := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
	for k, v := range more {
		av[k] = v
	}
	return av
}

func put(table, pk string, cond *string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item(pk, nil), ConditionExpression: cond,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}
}

func TestInjectTransactionConflict_CancelsTheNextTransactionOnThatItemOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, table := awstest.DynamoDB(t), awstest.NewTable(t)
	err := moto.InjectTransactionConflict(ctx, awstest.Endpoint(), table, "b")
	if errors.Is(err, moto.ErrNoFaults) && os.Getenv(awstest.EndpointEnv) != "" {
		t.Skip(err) // only the moto server this binary starts injects faults
	}
	require.NoError(t, err)

	// Another table's item "b" is not the armed one.
	other := awstest.NewTable(t)
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put(other, "b", nil)}})
	require.NoError(t, err)

	items := []types.TransactWriteItem{put(table, "a", nil), put(table, "b", nil)}
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var canceled *types.TransactionCanceledException
	require.ErrorAs(t, err, &canceled)
	require.Len(t, canceled.CancellationReasons, 2, "one reason per item, as DynamoDB gives")
	require.Equal(t, "None", aws.ToString(canceled.CancellationReasons[0].Code))
	require.Equal(t, "TransactionConflict", aws.ToString(canceled.CancellationReasons[1].Code))
	for _, pk := range []string{"a", "b"} {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item(pk, nil), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Empty(t, out.Item, "a canceled transaction writes nothing: %s", pk)
	}

	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	require.NoError(t, err, "the fault fires once")
}

func TestTransactWriteItems_ReturnsTheItemWhoseConditionFailedInDynamoDBsWireFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, table := awstest.DynamoDB(t), awstest.NewTable(t)
	stored := item("k", map[string]types.AttributeValue{
		"s": &types.AttributeValueMemberS{Value: "text"},
		"n": &types.AttributeValueMemberN{Value: "42"},
		"b": &types.AttributeValueMemberB{Value: []byte{0, 0xff, 7}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": &types.AttributeValueMemberS{Value: "y"}}},
	})
	_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: stored})
	require.NoError(t, err)

	tests := []struct {
		name     string
		ret      types.ReturnValuesOnConditionCheckFailure
		wantItem map[string]types.AttributeValue
	}{
		{"with ALL_OLD", types.ReturnValuesOnConditionCheckFailureAllOld, stored},
		{"without", types.ReturnValuesOnConditionCheckFailureNone, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			items := []types.TransactWriteItem{
				put(table, "fresh-"+tt.name, nil),
				{Put: &types.Put{TableName: aws.String(table), Item: item("k", nil), ConditionExpression: aws.String("attribute_not_exists(pk)"),
					ReturnValuesOnConditionCheckFailure: tt.ret}},
			}
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			var canceled *types.TransactionCanceledException
			require.ErrorAs(t, err, &canceled)
			require.Len(t, canceled.CancellationReasons, 2)
			require.Equal(t, "None", aws.ToString(canceled.CancellationReasons[0].Code))
			require.Empty(t, canceled.CancellationReasons[0].Item)
			require.Equal(t, "ConditionalCheckFailed", aws.ToString(canceled.CancellationReasons[1].Code))
			if tt.wantItem == nil {
				require.Empty(t, canceled.CancellationReasons[1].Item)
				return
			}
			require.Equal(t, tt.wantItem, canceled.CancellationReasons[1].Item)
		})
	}
}

// A request DynamoDB refuses as invalid (two operations on one item) never
// reaches the items, so it cannot meet another transaction: the armed
// conflict still fires on the next valid transaction (found by review 13c:
// it was consumed before the request was checked).
func TestInjectTransactionConflict_SurvivesAnInvalidTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, table := awstest.DynamoDB(t), awstest.NewTable(t)
	cases := map[string][]types.TransactWriteItem{
		"two operations on one item": {put(table, "b", nil), put(table, "b", nil)},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			err := moto.InjectTransactionConflict(ctx, awstest.Endpoint(), table, "b")
			if errors.Is(err, moto.ErrNoFaults) && os.Getenv(awstest.EndpointEnv) != "" {
				t.Skip(err)
			}
			require.NoError(t, err)
			_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: bad})
			require.Error(t, err)
			var canceled *types.TransactionCanceledException
			require.False(t, errors.As(err, &canceled), "refused as invalid, not canceled: %v", err)

			_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put(table, "b", nil)}})
			require.ErrorAs(t, err, &canceled, "the armed conflict still fires")
			require.Equal(t, "TransactionConflict", aws.ToString(canceled.CancellationReasons[0].Code))
		})
	}
}
