package dynamo

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/outflowhq/outflow/internal/outbox"
)

// throttleCodes are DynamoDB's error codes for a request refused for
// capacity: a partition's (ProvisionedThroughputExceededException, also
// what an on-demand table's hot partition answers), the account's or the
// table's (ThrottlingException), and the account's request rate
// (RequestLimitExceeded). A transaction names them in its cancellation
// reasons as ThrottlingError and ProvisionedThroughputExceeded.
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"RequestLimitExceeded":                   true,
	"ThrottlingError":                        true,
	"ProvisionedThroughputExceeded":          true,
}

// IsThrottle reports whether err is DynamoDB refusing a request for
// capacity, or the SDK refusing to retry one because its client's retry
// quota is spent (which throttles, at 5 tokens each, are what spend).
func IsThrottle(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && throttleCodes[api.ErrorCode()] {
		return true
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if throttleCodes[aws.ToString(r.Code)] {
				return true
			}
		}
	}
	var quota ratelimit.QuotaExceededError
	return errors.As(err, &quota)
}

// throttleMiddleware is the ID of the per-attempt middleware.
const throttleMiddleware = "outflow-throttle-note"

// noteThrottles tells the engine's sweep of each throttled attempt the
// SDK makes (outbox.NoteThrottle), so the sweep backs off at the first
// throttle, not after the SDK's retries are spent.
var noteThrottles = perAttempt(throttleMiddleware, func(ctx context.Context, err error) {
	if err != nil && IsThrottle(err) {
		outbox.NoteThrottle(ctx)
	}
})

// throttleAware is an API whose every call reports throttled attempts to
// the engine and returns a throttle that outlasted the SDK's retries as
// an outbox.ThrottledError, the domain's signal to back off.
type throttleAware struct{ api API }

// classify wraps a throttle for the engine.
func classify(err error) error {
	if err != nil && IsThrottle(err) {
		return outbox.Throttled(err)
	}
	return err
}

func (t throttleAware) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := t.api.GetItem(ctx, in, append(opts, noteThrottles)...)
	return out, classify(err)
}

func (t throttleAware) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := t.api.PutItem(ctx, in, append(opts, noteThrottles)...)
	return out, classify(err)
}

func (t throttleAware) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := t.api.UpdateItem(ctx, in, append(opts, noteThrottles)...)
	return out, classify(err)
}

func (t throttleAware) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := t.api.DeleteItem(ctx, in, append(opts, noteThrottles)...)
	return out, classify(err)
}

func (t throttleAware) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := t.api.Query(ctx, in, append(opts, noteThrottles)...)
	return out, classify(err)
}

func (t throttleAware) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := t.api.TransactWriteItems(ctx, in, append(opts, noteThrottles)...)
	return out, classify(err)
}
