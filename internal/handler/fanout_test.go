package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
)

// recordingInvoker records each partition the fan-out starts, and fails
// those in fail.
type recordingInvoker struct {
	mu      sync.Mutex
	started []outbox.Partition
	fail    map[int]bool
}

func (r *recordingInvoker) Invoke(_ context.Context, ev handler.PartitionEvent) error {
	p := ev.Partition
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, p)
	if r.fail[p.Index] {
		return errors.New("throttled")
	}
	return nil
}

func (r *recordingInvoker) partitions() []outbox.Partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Partition(nil), r.started...)
}

const fanoutShards = 4

// partitioned stages rows across all shards of a fresh table and returns
// a sweep runtime over it with OUTFLOW_SWEEP_PARTITIONS=k, the invoker,
// the log, and the staged keys by the partition of k that owns each.
func partitioned(t *testing.T, k int, inv handler.Invoker) (*handler.Runtime, *syncBuffer, map[int][]string, string) {
	t.Helper()
	ctx := context.Background()
	table, queue := awstest.NewTable(t), awstest.NewQueue(t, false)
	env := map[string]string{"OUTFLOW_TABLE": table, "OUTFLOW_ROUTES": "orders=" + queue, "OUTFLOW_WAKE_GRACE": "0s",
		"OUTFLOW_SHARDS": strconv.Itoa(fanoutShards), "OUTFLOW_SWEEP_PARTITIONS": strconv.Itoa(k)}
	out := &syncBuffer{}
	rt, err := handler.Setup(awstest.TestConfig(t), func(v string) string { return env[v] }, out)
	require.NoError(t, err)
	rt.Invoker = inv
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: table, Shards: fanoutShards, Ordered: []string{}})
	require.NoError(t, err)
	byPartition := map[int][]string{}
	shards := map[int]bool{}
	for i := 0; i < 24; i++ {
		key := fmt.Sprintf("row-%02d", i)
		_, err := p.Put(ctx, outflow.Row{Key: key, Queue: "orders", Payload: []byte(`{}`)})
		require.NoError(t, err)
		shard, err := strconv.Atoi(dynamo.ShardOf(key, fanoutShards))
		require.NoError(t, err)
		shards[shard] = true
		byPartition[shard%k] = append(byPartition[shard%k], key)
	}
	require.Len(t, shards, fanoutShards, "the rows cover every shard")
	return rt, out, byPartition, table
}

// left is the keys of the rows still in the table (not the published
// configuration's item, which the handler writes).
func left(t *testing.T, table string) map[string]bool {
	t.Helper()
	out, err := awstest.DynamoDB(t).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, item := range out.Items {
		var row struct {
			PK     string `dynamodbav:"pk"`
			Status string `dynamodbav:"status"`
		}
		require.NoError(t, attributevalue.UnmarshalMap(item, &row))
		if row.PK != dynamo.ConfigKey && row.Status != string(outbox.StatusDone) { // delivered rows are kept as done
			keys[row.PK] = true
		}
	}
	return keys
}

func TestSweepHandler_ScheduledSweepStartsEveryOtherPartitionOnceAndSweepsPartitionZero(t *testing.T) {
	t.Parallel()
	for _, k := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			t.Parallel()
			inv := &recordingInvoker{}
			rt, _, byPartition, table := partitioned(t, k, inv)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			sum, err := handler.NewSweep(rt).Handle(ctx, json.RawMessage(`{"source":"aws.scheduler","detail":"{}"}`))
			require.NoError(t, err)
			var want []outbox.Partition
			for i := 1; i < k; i++ {
				want = append(want, outbox.Partition{Index: i, Count: k})
			}
			require.ElementsMatch(t, want, inv.partitions(), "partitions 1 to K-1, each once")
			require.Equal(t, len(byPartition[0]), sum.Delivered, "%+v", sum)
			require.Zero(t, sum.Errors, "%+v", sum)
			require.Equal(t, map[bool]string{true: "0/" + strconv.Itoa(k)}[k > 1], sum.Partition, "a partitioned summary names its partition")
			remaining := left(t, table)
			for p, keys := range byPartition {
				for _, key := range keys {
					require.Equal(t, p != 0, remaining[key], "%s of partition %d", key, p)
				}
			}
		})
	}
}

func TestSweepHandler_PartitionEventSweepsOnlyItsShardsAndStartsNothing(t *testing.T) {
	t.Parallel()
	const k = 3
	inv := &recordingInvoker{}
	rt, _, byPartition, table := partitioned(t, k, inv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sweep := handler.NewSweep(rt)
	swept := map[int]bool{}
	for _, p := range []int{2, 0, 1} {
		sum, err := sweep.Handle(ctx, json.RawMessage(fmt.Sprintf(`{"partition":%d,"of":%d}`, p, k)))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("%d/%d", p, k), sum.Partition)
		require.Equal(t, len(byPartition[p]), sum.Delivered, "partition %d: %+v", p, sum)
		swept[p] = true
		remaining := left(t, table)
		for q, keys := range byPartition {
			for _, key := range keys {
				require.Equal(t, !swept[q], remaining[key], "after partition %d: %s of partition %d", p, key, q)
			}
		}
	}
	require.Empty(t, inv.partitions(), "a partition's sweep starts no other")
}

func TestSweepHandler_AnInvokeThatFailsIsLoggedCountedAndItsPartitionSweptHere(t *testing.T) {
	t.Parallel()
	const k = 3
	inv := &recordingInvoker{fail: map[int]bool{2: true}}
	rt, out, byPartition, _ := partitioned(t, k, inv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := handler.NewSweep(rt).Handle(ctx, nil)
	require.NoError(t, err, "the sweep of partition 0 goes on")
	require.Len(t, inv.partitions(), 2)
	require.Equal(t, 1, sum.Errors, "%+v", sum)
	require.Equal(t, len(byPartition[0])+len(byPartition[2]), sum.Delivered, "partition 0 and the one it could not start: %+v", sum)
	require.Equal(t, "0/3,2/3", sum.Partition)
	require.Contains(t, out.String(), `"msg":"sweep partition not started; sweeping it here","partition":"2/3","error":"throttled"`)
}

func TestSweepHandler_NoInvokerCountsEveryOtherPartitionAsAnError(t *testing.T) {
	t.Parallel()
	rt, out, _, _ := partitioned(t, 4, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := handler.NewSweep(rt).Handle(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Errors, "%+v", sum)
	require.Contains(t, out.String(), "sweep partitions not started: no invoker")
}

func TestSweepHandler_RefusesAnEventThatIsNotOneOfItsPartitions(t *testing.T) {
	t.Parallel()
	inv := &recordingInvoker{}
	rt, out, _, table := partitioned(t, 2, inv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct{ event, want string }{
		{`{"partition":0,"of":5}`, "partition event 0/5: this function sweeps 2 partitions"},
		{`{"partition":2,"of":2}`, "partition 2 of 2: must be in [0, 2)"},
		{`{"partition":-1,"of":2}`, "partition -1 of 2"},
		{`{"partition":0,"of":0}`, "partition event 0/0: this function sweeps 2 partitions"},
	} {
		sum, err := handler.NewSweep(rt).Handle(ctx, json.RawMessage(tc.event))
		require.ErrorContains(t, err, tc.want, tc.event)
		require.Equal(t, "refused", sum.Stopped, tc.event)
		require.Zero(t, sum.Claimed, tc.event)
	}
	require.Empty(t, inv.partitions(), "a refused sweep starts nothing")
	require.Len(t, left(t, table), 24, "nothing swept")
	require.Contains(t, out.String(), "sweep refused: not a partition of this function")
}
