package bench

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Refusals counts the conditional writes DynamoDB refused, by operation and
// by the transition the write was ("UpdateItem claim", "DeleteItem done"),
// from the responses themselves: an independent check on the engine's own
// Result.Conflicts, and the place that says which transition raced.
type Refusals struct {
	mu     sync.Mutex
	counts map[string]int
	// keys lists the refused writes' rows, in order.
	keys []string
}

// NewRefusals returns an empty counter.
func NewRefusals() *Refusals { return &Refusals{counts: map[string]int{}} }

// Instrument adds the counting middleware to cfg: every DynamoDB client
// made from it is counted.
func (r *Refusals) Instrument(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("outflow-bench-refusals",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil && refused(err) {
					r.add(awsmiddleware.GetOperationName(ctx)+" "+transition(in.Parameters), rowKey(in.Parameters))
				}
				return out, md, err
			}), middleware.After)
	})
}

// refused says whether err is a refused condition: a plain conditional
// write's, or one inside a transaction.
func refused(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, reason := range tc.CancellationReasons {
			if aws.ToString(reason.Code) == "ConditionalCheckFailed" {
				return true
			}
		}
	}
	return false
}

// transition names the write by what it does, as the write-unit arithmetic
// does.
func transition(params any) string {
	switch in := params.(type) {
	case *dynamodb.UpdateItemInput:
		return updateKind(in)
	case *dynamodb.DeleteItemInput:
		return "done"
	case *dynamodb.PutItemInput:
		return "stage"
	case *dynamodb.TransactWriteItemsInput:
		return "transaction"
	}
	return "other"
}

// rowKey is the row a write is for, if it names one.
func rowKey(params any) string {
	switch in := params.(type) {
	case *dynamodb.UpdateItemInput:
		return keyOf(in.Key)
	case *dynamodb.DeleteItemInput:
		return keyOf(in.Key)
	case *dynamodb.PutItemInput:
		return keyOf(in.Item)
	}
	return ""
}

func (r *Refusals) add(k, row string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[k]++
	r.keys = append(r.keys, row)
}

// Keys lists the rows of the refused writes, in order, one per refusal.
func (r *Refusals) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.keys)
}

// Total is every refused write.
func (r *Refusals) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

// ByTransition returns the refused writes by "Operation transition".
func (r *Refusals) ByTransition() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}
