package console_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// The overview shows what the lean backstop found beside what the audit
// found, as outflow stats does: no card while the backstop never ran
// (a dispatcher never lean), then its rows found, per pass, and the
// longest wait.
func TestBrowser_TheOverviewShowsWhatTheBackstopFoundOnceItRan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	c := e.serve(t, nil)
	tab := browser(t)

	nav(t, tab, c.url+"/", "#stray")
	require.Zero(t, count(t, tab, "#backstop-card"), "the backstop never ran")

	// A lean row two minutes old, which the stream never brought to the
	// wake: no shard, so in no due index.
	staged := time.Now().Add(-2 * time.Minute)
	at := &types.AttributeValueMemberN{Value: strconv.FormatInt(staged.UnixMilli(), 10)}
	_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "lean-missed"}, "queue": &types.AttributeValueMemberS{Value: "events.fifo"},
		"payload": &types.AttributeValueMemberS{Value: "x"}, "status": &types.AttributeValueMemberS{Value: "pending"},
		"attempt": &types.AttributeValueMemberN{Value: "0"}, "created_at": at, "due_at": at,
	}})
	require.NoError(t, err)
	b, err := dynamo.NewBackstop(awstest.DynamoDB(t), dynamo.Config{Table: e.table, Shards: 4}, 15*time.Second, true)
	require.NoError(t, err)
	res, err := b.Run(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, res.Indexed)
	require.True(t, res.PassDone, "the table fits in a page")

	nav(t, tab, c.url+"/", "#backstop")
	require.Equal(t, "1", text(t, tab, "#backstop"))
	card := text(t, tab, "#backstop-card")
	require.Contains(t, card, "lean rows found by the backstop")
	require.Contains(t, card, "1 last pass, 0 this pass; longest wait 2m")
	require.Equal(t, 1, count(t, tab, "#backstop-card.warn"), "a row found is one the stream missed")
	require.Equal(t, 1, count(t, tab, "#stray"), "beside the audit's")
}
