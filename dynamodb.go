package outflow

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoDB is the part of the DynamoDB client a Producer uses: a
// *dynamodb.Client satisfies it, and so does a wrapper of your own (for
// tracing, metrics or tests). Put writes with PutItem, ordered groups and
// Transact with TransactWriteItems, and GetItem reads a group's tail and,
// after a conflict, the row already staged under a key.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}
