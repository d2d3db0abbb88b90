package dynamo

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// StageAPI is the part of the DynamoDB client staging uses: the put of a
// row, the transaction of an ordered group's chain, and the consistent
// reads of a group's tail and of a staged row.
type StageAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// ErrStagingOnly is returned by a store NewStaging made for a call only the
// dispatcher makes.
var ErrStagingOnly = errors.New("a staging store does not update, delete or query")

// NewStaging returns a store for producers, over a client that needs only
// StageAPI's methods: Stage, StageOrdered, GroupTail and the items they
// build work; the dispatcher's calls fail with ErrStagingOnly.
func NewStaging(api StageAPI, cfg Config) (*Store, error) { return New(stagingOnly{api}, cfg) }

// stagingOnly is a StageAPI as an API whose other calls fail.
type stagingOnly struct{ StageAPI }

func (stagingOnly) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, ErrStagingOnly
}

func (stagingOnly) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, ErrStagingOnly
}

func (stagingOnly) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, ErrStagingOnly
}
