package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// tableError is a failed DynamoDB call on the table the CLI works on,
// named: a wrong --table reads `table "x": not found
// (ResourceNotFoundException)`, not the SDK's bare "Requested resource
// not found". It unwraps to the SDK's error, so the store still tells a
// failed condition from other errors.
type tableError struct {
	table string
	err   error
}

func (e tableError) Error() string {
	var missing *types.ResourceNotFoundException
	if errors.As(e.err, &missing) {
		return fmt.Sprintf("table %q: not found (%s)", e.table, missing.ErrorCode())
	}
	return fmt.Sprintf("table %q: %v", e.table, e.err)
}

func (e tableError) Unwrap() error { return e.err }

// nameTable makes every error of a DynamoDB client's calls a tableError
// for table: the one place the CLI's DynamoDB errors pass, whichever
// command, store or producer makes the call.
func nameTable(table string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("OutflowNameTable",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleInitialize(ctx, in)
					if err != nil && table != "" {
						err = tableError{table, err}
					}
					return out, md, err
				}), middleware.Before)
		})
	}
}
