package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Invoker starts the sweep of one partition as an invocation of its own.
// The scheduled sweep calls it for every partition but its own, so the
// backstop's K sweeps run side by side, each with its own timeout, memory
// and concurrency slot, all of which Lambda provides.
type Invoker interface {
	Invoke(ctx context.Context, ev PartitionEvent) error
}

// PartitionEvent is the event the fan-out sends: {"partition": i, "of": k,
// "until": ms}. Until is when the next scheduled sweep begins, in Unix
// milliseconds (0: not known): the partition stops claiming before it,
// however late Lambda's queue runs the event.
type PartitionEvent struct {
	outbox.Partition
	Until int64 `json:"until,omitempty"`
}

// LambdaAPI is the part of the Lambda client the fan-out uses.
type LambdaAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaInvoker invokes a function asynchronously (InvocationType Event)
// with a partition as its event: Lambda queues the event and runs it on an
// instance of its own, under the function's EventInvokeConfig (no retries,
// a short event age: the next scheduled sweep is the retry).
type LambdaInvoker struct {
	API LambdaAPI
	// Function is the function's name or ARN: the sweep's own, from
	// AWS_LAMBDA_FUNCTION_NAME, unqualified, so the sweeps run $LATEST.
	Function string
}

// Invoke implements Invoker.
func (l LambdaInvoker) Invoke(ctx context.Context, ev PartitionEvent) error {
	p := ev.Partition
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode partition %s: %w", p, err)
	}
	_, err = l.API.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(l.Function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	if err != nil {
		return fmt.Errorf("invoke %s for partition %s: %w", l.Function, p, err)
	}
	return nil
}

// fanOut starts partitions 1 to k-1 through inv, all at once, each to stop
// claiming before until, and returns the partitions it could not start
// with their errors. Partition 0 is the caller's own.
func fanOut(ctx context.Context, inv Invoker, k int, until int64) map[outbox.Partition]error {
	var (
		mu     sync.Mutex
		failed = map[outbox.Partition]error{}
		wg     sync.WaitGroup
	)
	for i := 1; i < k; i++ {
		p := outbox.Partition{Index: i, Count: k}
		wg.Go(func() {
			// A panic here would end the process: the Lambda runtime
			// recovers only the handler's own goroutine.
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					failed[p] = fmt.Errorf("invoke panicked: %v", r)
					mu.Unlock()
				}
			}()
			if err := inv.Invoke(ctx, PartitionEvent{Partition: p, Until: until}); err != nil {
				mu.Lock()
				failed[p] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}
