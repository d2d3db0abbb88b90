package bench

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

func TestRequestsWCU_PricesTheWakesUnclaimedSettleAsADoneWithoutAClaim(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"pk":      &types.AttributeValueMemberS{Value: "k"},
		"payload": &types.AttributeValueMemberS{Value: strings.Repeat("x", 900)},
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	claimed, free := NewRequests(), NewRequests()
	for _, r := range []*Requests{claimed, free} {
		r.record("DynamoDB.PutItem", &dynamodb.PutItemInput{Item: item})
	}
	claimed.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, ReturnValues: types.ReturnValueAllNew})
	claimed.record("DynamoDB.DeleteItem", &dynamodb.DeleteItemInput{Key: key, ExpressionAttributeNames: map[string]string{"#0": "claim_token", "#1": "status"}})
	free.record("DynamoDB.DeleteItem", &dynamodb.DeleteItemInput{Key: key, ConditionExpression: aws.String("x"),
		ExpressionAttributeNames: map[string]string{"#0": "status", "#1": "claimed_at", "#2": "claim_token"}})

	require.Equal(t, map[string]int{"stage": 1, "claim": 1, "done": 1}, claimed.Writes())
	require.Equal(t, map[string]int{"stage": 1, "settle": 1}, free.Writes())
	// A 900-byte item: the claim's attributes take the claimed row past
	// 1 KB (claim 2, done 2 + 1 index); the unclaimed row is deleted as
	// staged (1 + 1 index).
	require.InDelta(t, 2+2+3, claimed.WCU(IndexWrites), 1e-9)
	require.InDelta(t, 2+2, free.WCU(IndexWrites), 1e-9)
}
