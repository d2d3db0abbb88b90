package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
)

// hungDynamo is a DynamoDB endpoint whose every call hangs until its
// context ends.
type hungDynamo struct{}

func (hungDynamo) GetItem(ctx context.Context, _ *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungDynamo) PutItem(ctx context.Context, _ *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungDynamo) UpdateItem(ctx context.Context, _ *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungDynamo) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungDynamo) Query(ctx context.Context, _ *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungDynamo) TransactWriteItems(ctx context.Context, _ *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungDynamo) Scan(ctx context.Context, _ *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// Every call through WithCallTimeout ends at its timeout, however long the
// caller's own context lasts.
func TestWithCallTimeout_EndsEveryHungCall(t *testing.T) {
	t.Parallel()
	api := dynamo.WithCallTimeout(hungDynamo{}, 10*time.Millisecond)
	audit := dynamo.WithAuditCallTimeout(hungDynamo{}, 10*time.Millisecond)
	tests := []struct {
		name string
		call func(context.Context) error
	}{
		{"GetItem", func(ctx context.Context) error { _, err := api.GetItem(ctx, nil); return err }},
		{"PutItem", func(ctx context.Context) error { _, err := api.PutItem(ctx, nil); return err }},
		{"UpdateItem", func(ctx context.Context) error { _, err := api.UpdateItem(ctx, nil); return err }},
		{"DeleteItem", func(ctx context.Context) error { _, err := api.DeleteItem(ctx, nil); return err }},
		{"Query", func(ctx context.Context) error { _, err := api.Query(ctx, nil); return err }},
		{"TransactWriteItems", func(ctx context.Context) error { _, err := api.TransactWriteItems(ctx, nil); return err }},
		{"Scan", func(ctx context.Context) error { _, err := audit.Scan(ctx, nil); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorIs(t, tt.call(context.Background()), context.DeadlineExceeded)
		})
	}
}
