package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// perAttempt returns a call option that runs see after each attempt the
// SDK makes, with the attempt's error. It sits below the SDK's retry
// middleware, so it sees the attempts the retries hide: a throttle the
// next attempt got past, a request whose answer was lost and that the SDK
// sent again. id names the middleware; a call given it twice runs it once.
func perAttempt(id string, see func(ctx context.Context, err error)) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			if _, ok := stack.Finalize.Get(id); ok {
				return nil
			}
			return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc(id,
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleFinalize(ctx, in)
					see(ctx, err)
					return out, md, err
				}), "Retry", middleware.After)
		})
	}
}
