package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The functions and `outflow sweep` give every AWS call a timeout
// (outbox.Policy.CallTimeout) so that a claim, its send and its settle end
// inside the claim's lease even when a call hangs; the invocation's
// deadline alone ends later than the lease allows for a claim taken late
// in it.

// WithCallTimeout returns api with each call bounded by d.
func WithCallTimeout(api API, d time.Duration) API { return dynamoTimeout{api, d} }

// dynamoTimeout bounds each DynamoDB call the store makes.
type dynamoTimeout struct {
	api API
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

func (t dynamoTimeout) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.api.TransactWriteItems(ctx, in, opts...)
}

// WithAuditCallTimeout is WithCallTimeout for the audit's client, whose
// scans are bounded too.
func WithAuditCallTimeout(api AuditAPI, d time.Duration) AuditAPI {
	return auditTimeout{dynamoTimeout{api, d}, api}
}

// auditTimeout bounds each DynamoDB call the audit makes.
type auditTimeout struct {
	dynamoTimeout
	scan AuditAPI
}

func (t auditTimeout) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.scan.Scan(ctx, in, opts...)
}
