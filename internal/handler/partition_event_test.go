package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/telemetry"
)

// scriptedInvoker records the partitions the fan-out starts; each call
// waits delay (or until its context ends, when hang), or panics.
type scriptedInvoker struct {
	mu        sync.Mutex
	calls     []outbox.Partition
	deadlines []time.Time // each call's context deadline (zero: none)
	delay     time.Duration
	hang      bool
	panic     bool
}

func (f *scriptedInvoker) Invoke(ctx context.Context, ev handler.PartitionEvent) error {
	p := ev.Partition
	deadline, _ := ctx.Deadline()
	f.mu.Lock()
	f.calls = append(f.calls, p)
	f.deadlines = append(f.deadlines, deadline)
	f.mu.Unlock()
	if f.panic {
		panic("invoker blew up")
	}
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	time.Sleep(f.delay)
	return nil
}

func (f *scriptedInvoker) invoked() []outbox.Partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]outbox.Partition(nil), f.calls...)
}

// partitionRuntime is a sweep runtime over table and queue (no AWS call
// at init) with the given variables on top of a minimum.
func partitionRuntime(t *testing.T, table, queue string, vars map[string]string) *handler.Runtime {
	t.Helper()
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue, "OUTFLOW_WAKE_GRACE": "0s", "OUTFLOW_BATCH_LINGER": "0s"}
	for k, v := range vars {
		env[k] = v
	}
	rt, err := handler.Setup(awstest.TestConfig(t), func(k string) string { return env[k] }, &syncBuffer{})
	require.NoError(t, err)
	return rt
}

// keyOnShard is a key that hashes to shard of n.
func keyOnShard(t *testing.T, prefix string, shard, n int) string {
	t.Helper()
	for i := range 10_000 {
		key := prefix + "-" + strconv.Itoa(i)
		if dynamo.ShardOf(key, n) == strconv.Itoa(shard) {
			return key
		}
	}
	t.Fatal("no key")
	return ""
}

// an event that names a partition with values that are not a
// partition of this function (wrong JSON types, out-of-range numbers, a
// count other than OUTFLOW_SWEEP_PARTITIONS, half a partition) is refused
// with an error, never taken for the scheduled sweep: that would fan out
// partitions 1..k-1 a second time and sweep partition 0 beside the
// scheduled one (and run the audit), and a foreign count sweeps shards
// that another partition of this function also sweeps.
func TestSweep_RefusesAPartitionEventThatIsNotOneOfItsPartitions(t *testing.T) {
	t.Parallel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	tests := []struct {
		name        string
		event       string
		wantErr     bool
		wantInvokes int
	}{
		{"control: scheduler payload", `{}`, false, 1},
		{"control: no event", `null`, false, 1},
		{"control: partition 1 of 2", `{"partition":1,"of":2}`, false, 0},
		{"control: negative index", `{"partition":-1,"of":2}`, true, 0},
		{"index a string", `{"partition":"1","of":2}`, true, 0},
		{"count a string", `{"partition":1,"of":"2"}`, true, 0},
		{"index a fraction", `{"partition":1.0,"of":2}`, true, 0},
		{"index past int", `{"partition":1e20,"of":2}`, true, 0},
		{"count past int", `{"partition":1,"of":100000000000000000000}`, true, 0},
		{"count missing", `{"partition":1}`, true, 0},
		{"index null", `{"partition":null,"of":2}`, true, 0},
		{"a count other than the function's", `{"partition":1,"of":4}`, true, 0},
		{"the whole index, not a partition", `{"partition":0,"of":1}`, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "4", "OUTFLOW_SWEEP_PARTITIONS": "2"})
			inv := &scriptedInvoker{}
			rt.Invoker = inv
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sum, err := handler.NewSweep(rt).Handle(ctx, json.RawMessage(tt.event))
			require.Len(t, inv.invoked(), tt.wantInvokes, "invoked %v for %s (summary %+v)", inv.invoked(), tt.event, sum)
			if tt.wantErr {
				require.Error(t, err, "event %s swept partition %q", tt.event, sum.Partition)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// The fan-out copes with a slow or hung invoker (a throttled Lambda API
// the SDK retries): it is bounded, and the scheduled invocation still
// sweeps partition 0, and the partitions it could not start.
func TestSweep_ASlowOrHungFanOutDoesNotStarvePartitionZero(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		inv  *scriptedInvoker
	}{
		{"fast invoker", &scriptedInvoker{}},
		{"invoker takes 1s", &scriptedInvoker{delay: time.Second}},
		{"invoker hangs", &scriptedInvoker{hang: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
			rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "2", "OUTFLOW_SWEEP_PARTITIONS": "2", "OUTFLOW_DEADLINE_MARGIN": "1s"})
			rt.Invoker = tt.inv
			st, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
			require.NoError(t, err)
			for s := range 2 {
				key := keyOnShard(t, "p", s, 2)
				require.NoError(t, st.Stage(context.Background(), outbox.Row{Key: key, Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))
			}
			// The invocation has a minute, time enough to sweep on a
			// loaded machine; that the fan-out is bounded is read from the
			// deadline it gave the invoker, not from how long it took.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			invocationEnds, _ := ctx.Deadline()
			sum, err := handler.NewSweep(rt).Handle(ctx, nil)
			require.NoError(t, err)
			tt.inv.mu.Lock()
			deadlines := slices.Clone(tt.inv.deadlines)
			tt.inv.mu.Unlock()
			require.Len(t, deadlines, 1, "partition 1 was handed to the invoker")
			// A fan-out that let a hung invoke hold the whole invocation
			// would leave no time to sweep: it gives the invoke seconds.
			require.False(t, deadlines[0].IsZero(), "the fan-out gave the invoke no deadline")
			require.True(t, deadlines[0].Before(invocationEnds.Add(-30*time.Second)),
				"the fan-out gave the invoke until %s, the invocation ends %s: a hung invoke would hold the sweep", deadlines[0], invocationEnds)
			if tt.inv.hang {
				require.Equal(t, 2, sum.Delivered, "partition 0, and partition 1 it could not start: %+v", sum)
				require.Equal(t, 1, sum.Errors)
				require.Equal(t, "0/2,1/2", sum.Partition)
			} else {
				require.Equal(t, 1, sum.Delivered, "partition 0's row: %+v", sum)
				require.Equal(t, "0/2", sum.Partition)
			}
		})
	}
}

// OUTFLOW_SWEEP_RATE counts from the invocation's start, not from the end
// of the fan-out: the next scheduled sweep starts a period after this one
// did. With a 2.5 s period, a 1 s margin and a fan-out of 2 s, claims
// stop at 1.5 s, before the fan-out ends: nothing is claimed. (Counted
// from the fan-out's end, they would stop at 3.5 s and the row would go.)
func TestSweep_SweepRateCountsFromTheInvocationsStart(t *testing.T) {
	t.Parallel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "2", "OUTFLOW_SWEEP_PARTITIONS": "2",
		"OUTFLOW_DEADLINE_MARGIN": "1s", "OUTFLOW_SWEEP_RATE": "2500ms"})
	rt.Invoker = &scriptedInvoker{delay: 2 * time.Second}
	st, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
	require.NoError(t, err)
	key := keyOnShard(t, "p0", 0, 2)
	require.NoError(t, st.Stage(context.Background(), outbox.Row{Key: key, Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sum, err := handler.NewSweep(rt).Handle(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, sum.Claimed, "%+v", sum)
	require.Equal(t, "deadline", sum.Stopped)
}

// OUTFLOW_SWEEP_RATE stops a sweep's claims in time for the next
// sweep; it must not cut off the settle of a row sent while the invocation
// still has most of its time (a Lambda timeout would not): a row sent and
// left claimed is sent again when its lease lapses.
func TestSweep_SweepRateStopsClaimsButNotTheSettleOfARowSent(t *testing.T) {
	t.Parallel()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "1",
		"OUTFLOW_DEADLINE_MARGIN": "1s", "OUTFLOW_SWEEP_RATE": "3s"})
	st, err := dynamo.New(awstest.DynamoDB(t), rt.Config.Store)
	require.NoError(t, err)
	// SQS takes 3.5 s to accept the batch (it is accepted: the message is
	// on the queue whatever the caller's context does next).
	rt.Engine, err = outbox.New(st, slowDeliverer{delay: 3500 * time.Millisecond}, rt.Config.Policy)
	require.NoError(t, err)
	require.NoError(t, st.Stage(context.Background(), outbox.Row{Key: "slow", Queue: "orders", Payload: []byte("x")}, time.Now().Add(-time.Second)))

	// The invocation has 60 s: a Lambda timeout is nowhere near.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := handler.NewSweep(rt).Handle(ctx, nil)
	require.NoError(t, err)
	row, err := st.Get(context.Background(), "slow")
	require.NoError(t, err)
	require.True(t, awstest.SettledDone(row), "the sent row is settled done, not left claimed to be sent again: %+v; summary %+v", row, sum)
}

// a panicking invoker never takes the whole sweep process down
// (the Lambda runtime recovers a panic only in the handler's goroutine,
// not in the fan-out's goroutines). The child process runs the sweep and
// prints its summary; the parent checks it exits normally and that the
// sweep ran: the invoker was called (and panicked), and the partition it
// could not start was counted as an error and swept by the child itself.
func TestSweep_FanOutSurvivesAPanickingInvoker(t *testing.T) {
	t.Parallel()
	const marker = "OUTFLOW_TEST_PANIC_CHILD_RESULT "
	if os.Getenv("OUTFLOW_TEST_PANIC_CHILD") == "1" {
		table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
		rt := partitionRuntime(t, table, queue, map[string]string{"OUTFLOW_SHARDS": "2", "OUTFLOW_SWEEP_PARTITIONS": "2"})
		inv := &scriptedInvoker{panic: true}
		rt.Invoker = inv
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sum, err := handler.NewSweep(rt).Handle(ctx, nil)
		out, jerr := json.Marshal(panicChildResult{Summary: sum, Err: fmt.Sprint(err), Invoked: len(inv.invoked())})
		require.NoError(t, jerr)
		fmt.Println(marker + string(out))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweep_FanOutSurvivesAPanickingInvoker$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OUTFLOW_TEST_PANIC_CHILD=1", awstest.EndpointEnv+"="+awstest.Endpoint())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the sweep process died:\n%s", out)
	var got panicChildResult
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, marker); ok {
			require.NoError(t, json.Unmarshal([]byte(rest), &got), line)
		}
	}
	require.Equal(t, 1, got.Invoked, "the invoker was called for partition 1 (and panicked):\n%s", out)
	require.Equal(t, "<nil>", got.Err, "%s", out)
	require.Equal(t, 1, got.Summary.Errors, "the partition it could not start counts as an error: %+v", got.Summary)
	require.Equal(t, "0/2,1/2", got.Summary.Partition, "the child swept partition 1 itself: %+v", got.Summary)
}

// panicChildResult is what the panicking-invoker child reports.
type panicChildResult struct {
	Summary telemetry.Summary
	Err     string
	Invoked int
}

// slowDeliverer accepts every row after delay.
type slowDeliverer struct{ delay time.Duration }

func (d slowDeliverer) Deliver(_ context.Context, _ string, rows []outbox.Row) []error {
	time.Sleep(d.delay)
	return make([]error, len(rows))
}
