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
		"shard":   &types.AttributeValueMemberS{Value: "0"},
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
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "shard": &types.AttributeValueMemberS{Value: "0"}, "payload": &types.AttributeValueMemberS{Value: "x"}}
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

// A lean row is staged with no shard, and the due index is sparse on
// shard: its stage and its settle write the table alone, whichever
// counter recorded the stage (the wake's takes it with StagedBy). Given a
// shard (the wake's hand-over, the backstop), the row is in the index as
// any other: the index write puts its entry, and a later done deletes it.
func TestRequestsWCU_ALeanRowWritesNoDueIndexUntilItIsIndexed(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"pk":      &types.AttributeValueMemberS{Value: "k"},
		"status":  &types.AttributeValueMemberS{Value: "pending"},
		"payload": &types.AttributeValueMemberS{Value: strings.Repeat("x", 300)},
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	settleNames := map[string]string{"#0": "status", "#1": "done_at", "#2": "claimed_at"}

	t.Run("settled as done, or deleted", func(t *testing.T) {
		t.Parallel()
		stage := NewRequests()
		stage.record("DynamoDB.PutItem", &dynamodb.PutItemInput{Item: item})
		kept, deleted := NewRequests(), NewRequests()
		kept.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("SET #0 = :0, #1 = :1 REMOVE due_at"), ExpressionAttributeNames: settleNames})
		deleted.record("DynamoDB.DeleteItem", &dynamodb.DeleteItemInput{Key: key, ExpressionAttributeNames: settleNames})
		require.InDelta(t, 1, stage.WCU(IndexWrites), 1e-9, "the row alone")
		for _, wake := range []*Requests{kept, deleted} {
			require.Equal(t, map[string]int{"settle": 1}, wake.Writes())
			require.InDelta(t, 2, wake.WCU(IndexWrites), 1e-9, "before StagedBy the row is taken to be indexed")
			wake.StagedBy(stage)
			require.InDelta(t, 1, wake.WCU(IndexWrites), 1e-9, "the settle: the table alone")
			table, index := writeUnits(1, stage, wake)
			require.InDelta(t, 2, table, 1e-9)
			require.Zero(t, index)
		}
	})

	t.Run("handed over, then done", func(t *testing.T) {
		t.Parallel()
		r := NewRequests()
		r.record("DynamoDB.PutItem", &dynamodb.PutItemInput{Item: item})
		// Store.Index: SET shard, under the settle's condition.
		r.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("SET #7 = :5\n"),
			ConditionExpression:      aws.String("(#0 = :0) AND (attribute_not_exists (#7))"),
			ExpressionAttributeNames: map[string]string{"#0": "status", "#1": "stage_id", "#2": "attempt", "#5": "claimed_at", "#6": "claim_token", "#7": "shard"}})
		// The backstop's: SET shard and a due time if none.
		r.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("SET #0 = :0, #1 = if_not_exists(#1, :1)\n"),
			ExpressionAttributeNames: map[string]string{"#0": "shard", "#1": "due_at", "#2": "status"}})
		r.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, ReturnValues: types.ReturnValueAllNew})
		r.record("DynamoDB.DeleteItem", &dynamodb.DeleteItemInput{Key: key, ExpressionAttributeNames: map[string]string{"#0": "claim_token"}})
		require.Equal(t, map[string]int{"stage": 1, "index": 2, "claim": 1, "done": 1}, r.Writes())
		// stage 1; index 1 + 1 entry, twice (the rule does not know the
		// second would be refused); claim 1; done 1 + the entry's delete.
		require.InDelta(t, 1+2+2+1+2, r.WCU(IndexWrites), 1e-9)
	})

	t.Run("a retry of the unclaimed send, and a dead-lettering", func(t *testing.T) {
		t.Parallel()
		retry := NewRequests()
		retry.record("DynamoDB.PutItem", &dynamodb.PutItemInput{Item: item})
		retry.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, ExpressionAttributeNames: map[string]string{"#0": "errors", "#1": "due_at", "#2": "shard"}})
		require.InDelta(t, 1+(1+1), retry.WCU(IndexWrites), 1e-9, "the retry puts the entry: nothing to move")
		dead := NewRequests()
		dead.record("DynamoDB.PutItem", &dynamodb.PutItemInput{Item: item})
		dead.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("SET #0 = :0 REMOVE #1"),
			ExpressionAttributeNames: map[string]string{"#0": "dead_queue", "#1": "due_at", "#2": "errors"}})
		require.InDelta(t, 1+(1+1), dead.WCU(IndexWrites), 1e-9, "the dead index's put only")
	})
}
