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

// A done that keeps the row (the default retention) is an UpdateItem that
// removes the due-index entry: priced as the delete it replaces, never as
// an update that moves no index.
func TestRequestsWCU_PricesADoneThatKeepsTheRowAsTheDeleteItReplaces(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "payload": &types.AttributeValueMemberS{Value: "x"}}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	tests := []struct {
		name  string
		names map[string]string
		kind  string
	}{
		{"claimed", map[string]string{"#0": "status", "#1": "done_at", "#2": "expires_at", "#3": "claim_token"}, "done"},
		{"sent unclaimed by the wake", map[string]string{"#0": "status", "#1": "done_at", "#2": "claimed_at"}, "settle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			deleted, kept := NewRequests(), NewRequests()
			for _, r := range []*Requests{deleted, kept} {
				r.record("DynamoDB.PutItem", &dynamodb.PutItemInput{Item: item})
			}
			deleted.record("DynamoDB.DeleteItem", &dynamodb.DeleteItemInput{Key: key, ExpressionAttributeNames: tt.names})
			kept.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("SET #0 = :0, #1 = :1 REMOVE shard, due_at"), ExpressionAttributeNames: tt.names})
			require.Equal(t, map[string]int{"stage": 1, tt.kind: 1}, kept.Writes())
			require.InDelta(t, deleted.WCU(IndexWrites), kept.WCU(IndexWrites), 1e-9)
		})
	}
}
