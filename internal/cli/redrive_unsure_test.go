package cli_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// dead redrive leaves a dead letter whose place's closing message may
// have reached the consumer (closed unsure), and says why and what to do
// instead, in text and JSON: sent, it could arrive after its place was
// closed and be applied nowhere. --late redrives it (issue 50, item 3).
func TestDeadRedrive_SaysItLeftAPlaceWhoseClosingMessageMayHaveLanded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.deadLetters(t, "ghost", 3)
	_, err := awstest.DynamoDB(t).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(e.table), Key: map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: keys[0]}},
		UpdateExpression: aws.String("SET #c = :c"), ExpressionAttributeNames: map[string]string{"#c": dynamo.AttrClosed},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: outbox.ClosedUnsure}},
	})
	require.NoError(t, err)

	out := e.ok(t, "dead", "redrive", keys[0], keys[1])
	require.Contains(t, out, "redriven 1, skipped 0")
	require.Contains(t, out, "not redriven 1: the message closing their place may have reached the consumer")
	require.Contains(t, out, "purge them")
	require.Contains(t, out, "--late")
	require.Equal(t, outbox.StatusFailed, e.status(t, keys[0]), "left as it was")
	require.Equal(t, outbox.StatusPending, e.status(t, keys[1]))

	var res struct {
		Done          int `json:"done"`
		MayHaveClosed int `json:"may_have_closed"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "dead", "redrive", "--all", "--output", "json")), &res))
	require.Equal(t, 1, res.Done)
	require.Equal(t, 1, res.MayHaveClosed)

	out = e.ok(t, "dead", "redrive", keys[0], "--late")
	require.Contains(t, out, "redriven 1, skipped 0")
	require.NotContains(t, out, "not redriven")
	require.Equal(t, outbox.StatusPending, e.status(t, keys[0]))
}
