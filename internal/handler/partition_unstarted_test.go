package handler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
)

// deniedInvoker refuses every Invoke, as Lambda does for a role
// without lambda:InvokeFunction (AccessDeniedException), or a throttled
// account.
type deniedInvoker struct{}

func (deniedInvoker) Invoke(context.Context, handler.PartitionEvent) error {
	return errors.New("AccessDeniedException: not authorized to perform lambda:InvokeFunction")
}

// every due row is swept (none left out), and the fan-out copes
// with invoker errors. A partition the scheduled sweep cannot start is
// never swept by anyone: its rows wait for ever (the wake is advisory),
// with only Errors to show for it. The scheduled invocation, which owns
// the whole schedule, should sweep what it could not hand off.
func TestSweep_SweepsThePartitionsItCouldNotStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		inv  handler.Invoker
	}{
		{"invoke fails", deniedInvoker{}},
		{"no invoker (AWS_LAMBDA_FUNCTION_NAME unset)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
			rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "2", "OUTFLOW_SWEEP_PARTITIONS": "2"})
			rt.Invoker = tt.inv
			st, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
			require.NoError(t, err)
			key := keyOnShard(t, "p1", 1, 2)
			require.NoError(t, st.Stage(context.Background(), outbox.Row{Key: key, Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			delivered := 0
			for range 3 { // three scheduled sweeps
				sum, err := handler.NewSweep(rt).Handle(ctx, nil)
				require.NoError(t, err)
				delivered += sum.Delivered
			}
			row, err := st.Get(context.Background(), key)
			require.NoError(t, err)
			require.True(t, awstest.SettledDone(row), "the row of partition 1 after three scheduled sweeps (delivered %d): %+v", delivered, row)
		})
	}
}
