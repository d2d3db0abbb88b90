package handler

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// The functions give every AWS call a timeout (outbox.Policy.CallTimeout)
// so that a claim, its send and its settle end inside the claim's lease
// even when a call hangs; the invocation's deadline alone ends later than
// the lease allows for a claim taken late in it.

// dynamoTimeout bounds each DynamoDB call the store makes.
type dynamoTimeout struct {
	api dynamo.API
	d   time.Duration
}

func (t dynamoTimeout) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.GetItem(ctx, in, opts...)
}

func (t dynamoTimeout) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.PutItem(ctx, in, opts...)
}

func (t dynamoTimeout) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.UpdateItem(ctx, in, opts...)
}

func (t dynamoTimeout) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.DeleteItem(ctx, in, opts...)
}

func (t dynamoTimeout) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.Query(ctx, in, opts...)
}

// sqsTimeout bounds each SQS call the deliverer makes.
type sqsTimeout struct {
	api delivery.API
	d   time.Duration
}

func (t sqsTimeout) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.SendMessageBatch(ctx, in, opts...)
}
