package dynamo_test

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

// Review 17c: the oldest due entry of a shard is read with one query,
// Limit 1. When that entry's due_at is a number that is not an integer of
// milliseconds (a producer in another language writing a fraction, or 0),
// Count drops the shard's oldest altogether, although the shard holds a
// well-formed row due an hour ago: the backlog's lag reads 0, silently
// low, where --exact (Stats) reports the hour.
func TestCount_OldestDueIsNotHiddenByAnOddDueAt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		dueAt string // of the odd row, sorted first on its shard
	}{
		{"a fraction of a millisecond", "1799990000000.5"},
		{"zero", "0"},
		{"a fraction below one", "0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			client := awstest.DynamoDB(t)
			table := awstest.NewTable(t)
			put := func(key, dueAt string) {
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: key}, "queue": &types.AttributeValueMemberS{Value: "orders"},
					"payload": &types.AttributeValueMemberS{Value: "x"}, "status": &types.AttributeValueMemberS{Value: "pending"},
					"attempt": &types.AttributeValueMemberN{Value: "0"}, "created_at": &types.AttributeValueMemberN{Value: "1"},
					"due_at": &types.AttributeValueMemberN{Value: dueAt}, "shard": &types.AttributeValueMemberS{Value: "0"},
				}})
				require.NoError(t, err)
			}
			put("odd", tt.dueAt)
			hourAgo := t0.Add(-time.Hour)
			put("hour-old", strconv.FormatInt(hourAgo.UnixMilli(), 10))

			op, err := dynamo.NewOperator(client, dynamo.Config{Table: table, Shards: 1})
			require.NoError(t, err)
			exact, err := op.Stats(ctx, t0, nil)
			require.NoError(t, err)
			st, err := op.Count(ctx, t0, dynamo.CountQuery{DeadQueues: []string{"orders"}, Cap: dynamo.DefaultCountCap})
			require.NoError(t, err)
			require.Equal(t, 2, st.Total.Due, "both rows are due")
			require.False(t, exact.OldestDue.IsZero(), "--exact sees the hour-old row")
			require.False(t, st.OldestDue.IsZero(), "Count reports no oldest due row with 2 rows due: the lag reads 0ms")
			require.False(t, st.OldestDue.After(hourAgo), "the oldest due row waits at least the hour")
		})
	}
}
