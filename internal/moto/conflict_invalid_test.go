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
