package dynamo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// throttledAPI answers the due-index query with one due row, the read of
// the audit item with none, and every BatchGetItem with all its keys
// unprocessed, as a throttled table does; it cancels the caller's context
// on the first BatchGetItem.
type throttledAPI struct {
	dynamo.OperatorAPI
	cancel context.CancelFunc
	gets   int
}

func (a *throttledAPI) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{{"pk": s("a"), "due_at": n(1), "queue": s("orders")}}}, nil
}

func (a *throttledAPI) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (a *throttledAPI) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	a.gets++
	a.cancel()
	if a.gets > 20 {
		return nil, errors.New("still polling a throttled table after the caller gave up")
	}
	return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
}

func TestOperatorStats_StopsWaitingOutThrottlingWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := &throttledAPI{cancel: cancel}
	op, err := dynamo.NewOperator(api, dynamo.Config{Table: "outbox", Shards: 1})
	require.NoError(t, err)
	_, err = op.Stats(ctx, time.UnixMilli(10), nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, api.gets)
}
