package handler_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
)

// capturedLambda is a Lambda API that records the payloads of the
// asynchronous invokes it accepts, as Lambda's async queue does before it
// runs them (possibly much later: up to MaximumEventAgeInSeconds = 60 s).
type capturedLambda struct {
	mu       sync.Mutex
	payloads [][]byte
}

func (c *capturedLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.payloads = append(c.payloads, in.Payload)
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// Lambda runs an asynchronous invoke when it can: an event waits in its
// queue for a concurrency slot (SweepReservedConcurrency below
// SweepPartitions, a throttled account) for up to the function's
// MaximumEventAgeInSeconds, 60 s, a whole rate(1 minute) period. So the
// partition event carries when the next scheduled sweep begins ("until"),
// and the claims of a partition started at T0 stop at T0 + rate − margin,
// however late Lambda runs the event (counted from the partition's own
// start, two sweeps of one partition raced: found by review 17b).
//
// No clock is waited on: the scheduled sweep's event says when the
// schedule fired (as the template's does), a rate ago or more for the late
// case, so its "until" has passed when partition 1 runs, as it would have
// for an event Lambda kept that long. The control case fired just now, and
// has the rate, a minute, to claim in.
func TestSweep_APartitionEventRunLateStopsClaimingBeforeTheNextScheduledSweep(t *testing.T) {
	t.Parallel()
	const rate, margin = time.Minute, time.Second
	tests := []struct {
		name        string
		firedAgo    time.Duration // how long before partition 1 runs the schedule fired
		wantClaimed int
	}{
		{"control: run at once", 0, 1},
		{"run after the next scheduled sweep began", rate + time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
			rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "2", "OUTFLOW_SWEEP_PARTITIONS": "2",
				"OUTFLOW_DEADLINE_MARGIN": margin.String(), "OUTFLOW_SWEEP_RATE": rate.String()})
			api := &capturedLambda{}
			rt.Invoker = handler.LambdaInvoker{API: api, Function: "outflow-sweep"}
			st, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			// The scheduled sweep that fired at T0 hands partition 1 to Lambda.
			t0 := time.Now().Add(-tt.firedAgo)
			scheduled := `{"scheduled_time": "` + t0.UTC().Format(time.RFC3339) + `"}`
			_, err = handler.NewSweep(rt).Handle(ctx, json.RawMessage(scheduled))
			require.NoError(t, err)
			require.Len(t, api.payloads, 1)

			// A row due on partition 1's shard.
			key := keyOnShard(t, "late", 1, 2)
			require.NoError(t, st.Stage(ctx, outbox.Row{Key: key, Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))

			// Lambda runs the queued event now.
			sum, err := handler.NewSweep(rt).Handle(ctx, json.RawMessage(api.payloads[0]))
			require.NoError(t, err)
			require.Equal(t, tt.wantClaimed, sum.Claimed,
				"partition event %s run %s after the schedule fired (rate %s, margin %s) claimed %d rows; summary %+v",
				api.payloads[0], time.Since(t0).Round(time.Millisecond), rate, margin, sum.Claimed, sum)
		})
	}
}

// EventBridge Scheduler invokes the sweep asynchronously too, and its
// event may wait in Lambda's queue: the template has the schedule put the
// time it fired in the event, and the sweep stops claiming where the next
// scheduled sweep begins, one rate after that time.
func TestSweep_AScheduledSweepRunLateStopsClaimingAtTheNextSchedule(t *testing.T) {
	t.Parallel()
	// A minute, as deployed: the case run as it fired has that long to
	// claim, so a loaded machine does not turn it into a late one.
	const rate = time.Minute
	tests := []struct {
		name        string
		firedAgo    time.Duration
		wantClaimed int
	}{
		{"run as it fired", 0, 1},
		{"run after the next sweep began", rate + time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
			rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "1", "OUTFLOW_DEADLINE_MARGIN": "1s", "OUTFLOW_SWEEP_RATE": rate.String()})
			st, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
			require.NoError(t, err)
			require.NoError(t, st.Stage(context.Background(), outbox.Row{Key: "due", Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			event := `{"scheduled_time": "` + time.Now().Add(-tt.firedAgo).UTC().Format(time.RFC3339) + `"}`
			sum, err := handler.NewSweep(rt).Handle(ctx, json.RawMessage(event))
			require.NoError(t, err)
			require.Equal(t, tt.wantClaimed, sum.Claimed, "%s: %+v", event, sum)
		})
	}
}
