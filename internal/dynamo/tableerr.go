package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// TableError is a failed DynamoDB call on a table, named. A table that
// does not exist reads `table "x": not found in region R at endpoint E
// (ResourceNotFoundException)`, not the SDK's bare "Requested resource
// not found": a wrong table name, region or endpoint shows at once. It
// unwraps to the SDK's error, so errors.As still finds
// *types.ResourceNotFoundException and the store still tells a failed
// condition from other errors.
type TableError struct {
	Table string
	// Region and Endpoint are where the client looked for the table: its
	// region, and its endpoint when one was set (none: AWS's own); empty
	// when not known.
	Region, Endpoint string
	Err              error
}

func (e *TableError) Error() string {
	var missing *types.ResourceNotFoundException
	if errors.As(e.Err, &missing) {
		where := ""
		if e.Region != "" {
			where += " in region " + e.Region
		}
		if e.Endpoint != "" {
			where += " at endpoint " + e.Endpoint
		}
		return fmt.Sprintf("table %q: not found%s (%s)", e.Table, where, missing.ErrorCode())
	}
	return fmt.Sprintf("table %q: %v", e.Table, e.Err)
}

// Unwrap returns the failed call's error.
func (e *TableError) Unwrap() error { return e.Err }

// NameTable makes err, a failed call of client on table, a *TableError
// with the client's region and endpoint (where client is a
// *dynamodb.Client, or embeds one), unless err is nil or names the table
// already.
func NameTable(client any, table string, err error) error {
	var named *TableError
	if err == nil || table == "" || errors.As(err, &named) {
		return err
	}
	e := &TableError{Table: table, Err: err}
	if c, ok := client.(interface{ Options() dynamodb.Options }); ok {
		o := c.Options()
		e.Region, e.Endpoint = o.Region, aws.ToString(o.BaseEndpoint)
	}
	return e
}

// NameTableErrors is a client option that makes every error of the
// client's calls a *TableError for table, with the client's region and
// endpoint: the one place every DynamoDB error passes, whichever command,
// store or producer makes the call. Give it after the options that set
// the region or the endpoint.
func NameTableErrors(table string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		region, endpoint := o.Region, aws.ToString(o.BaseEndpoint)
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("OutflowNameTable",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleInitialize(ctx, in)
					var named *TableError
					if err != nil && table != "" && !errors.As(err, &named) {
						err = &TableError{Table: table, Region: region, Endpoint: endpoint, Err: err}
					}
					return out, md, err
				}), middleware.Before)
		})
	}
}
