package local_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/local"
	"github.com/outflowhq/outflow/internal/outbox"
)

const template = "../../template.yaml"

func TestDemo_SummaryMatchesWhatWasStaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts, demo := local.NewDemo(local.Options{Template: template})
	r, err := local.Start(ctx, opts)
	require.NoError(t, err)
	defer r.Close()
	rep := runDemo(t, r, demo)

	require.True(t, rep.OK(), "problems: %v", rep.Problems)
	require.Equal(t, 50, rep.Staged)
	require.Equal(t, 48, rep.Delivered)
	require.Equal(t, 2, rep.DeadLettered)
	require.Equal(t, local.QueueReport{Staged: 31, Delivered: 31}, *rep.Queues["orders"])
	require.Equal(t, local.QueueReport{Staged: 15, Delivered: 15}, *rep.Queues["events.fifo"])
	// One row through the template's topic and one through its bus, each
	// read from the consumer's queue behind it with its trace context.
	require.Equal(t, local.QueueReport{Staged: 1, Delivered: 1}, *rep.Queues["notices"])
	require.Equal(t, local.QueueReport{Staged: 1, Delivered: 1}, *rep.Queues["domain"])
	require.ElementsMatch(t, []local.SubscriberReport{
		{Route: "notices", Kind: "SNS", Via: "subscription (raw) → queue", Delivered: 1, TraceParents: 1},
		{Route: "domain", Kind: "EventBridge", Via: "rule → queue", Delivered: 1, TraceParents: 1},
	}, rep.Subscribers)
	require.Equal(t, rep.Delivered, rep.TraceParents, "every delivered row arrived with the traceparent it was staged with")
	require.Equal(t, rep.Delivered, rep.EffectsOnce, "the consumer applied every delivered row's effect once")
	// A row with no route spends its budget, as a broken target's does.
	require.Equal(t, local.QueueReport{Staged: 1, Retried: 2, DeadLettered: 1}, *rep.Queues["payments"])
	require.Equal(t, local.QueueReport{Staged: 1, Retried: 2, DeadLettered: 1}, *rep.Queues[local.DemoBrokenRoute])
	require.Positive(t, rep.WakeP50)
	require.GreaterOrEqual(t, rep.WakeP99, rep.WakeP50)
}

func TestWakeFeed_SeesExactlyThePendingInsertsTheTemplateFilterMatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string]int{}
	names := map[string]int{}
	r, err := local.Start(ctx, local.Options{
		Template:   template,
		SweepEvery: 300 * time.Millisecond,
		OnWake: func(ev events.DynamoDBEvent) {
			mu.Lock()
			defer mu.Unlock()
			for _, rec := range ev.Records {
				names[rec.EventName]++
				seen[rec.Change.NewImage["pk"].String()]++
			}
		},
	})
	require.NoError(t, err)
	defer r.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = r.Run(runCtx) }()

	db := dynamodb.NewFromConfig(r.AWS)
	p, err := outflow.NewProducer(db, outflow.Config{Table: r.Stack.Table, Ordered: []string{}})
	require.NoError(t, err)
	want := map[string]int{}
	for i := range 5 {
		key := fmt.Sprintf("k-%d", i)
		_, err := p.Put(ctx, outflow.Row{Key: key, Queue: "orders", Payload: []byte("x")})
		require.NoError(t, err)
		want[key] = 1
	}
	// An inserted row that is not pending, and a plain modification: the
	// filter must keep both from the wake.
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.Stack.Table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "already-failed"}, "status": &types.AttributeValueMemberS{Value: "failed"},
	}})
	require.NoError(t, err)
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.Stack.Table),
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "already-failed"}},
		UpdateExpression: aws.String("SET note = :n"), ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: "x"}},
	})
	require.NoError(t, err)

	// Wait until the rows were delivered and settled, so their MODIFY
	// records are in the stream; what is left is that row and the
	// configuration the functions published (an INSERT the filter drops).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(r.Stack.Table)})
		require.NoError(c, err)
		var keys []string
		for _, item := range out.Items {
			if st, ok := item["status"].(*types.AttributeValueMemberS); ok && st.Value == string(outbox.StatusDone) {
				continue // delivered, kept as done (OUTFLOW_DONE_RETENTION)
			}
			if pk, ok := item["pk"].(*types.AttributeValueMemberS); ok {
				keys = append(keys, pk.Value)
			}
		}
		require.ElementsMatch(c, []string{"already-failed", dynamo.ConfigKey}, keys)
	}, 20*time.Second, 100*time.Millisecond)
	// Then a sentinel: a pending insert written after every record the
	// filter must drop. moto's table stream is one shard, read in order,
	// so once the wake has seen the sentinel the poller has read past
	// them, and the filter has had its chance to let them through.
	_, err = p.Put(ctx, outflow.Row{Key: "sentinel", Queue: "orders", Payload: []byte("x")})
	require.NoError(t, err)
	want["sentinel"] = 1
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["sentinel"] > 0
	}, 20*time.Second, 20*time.Millisecond, "the wake never saw the sentinel insert")

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, seen)
	require.Equal(t, map[string]int{"INSERT": 6}, names)
}

func TestClose_LeavesNoChildProcess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rie        bool
		partitions int
		pids       int
	}{
		{false, 0, 1}, {true, 0, 3},
		// One more emulator per sweep partition beyond the first.
		{true, 3, 5},
	} {
		t.Run(fmt.Sprintf("rie=%v,partitions=%d", tc.rie, tc.partitions), func(t *testing.T) {
			t.Parallel()
			opts := local.Options{Template: template, RIE: tc.rie, Bootstraps: t.TempDir(), SweepPartitions: tc.partitions}
			if tc.rie {
				opts.Bootstraps = buildBootstraps(t)
			}
			r, err := local.Start(context.Background(), opts)
			require.NoError(t, err)
			pids := r.Pids()
			require.Len(t, pids, tc.pids, "moto, and the emulators")
			for _, pid := range pids {
				require.NoError(t, syscall.Kill(-pid, 0), "process group %d is alive", pid)
			}
			r.Close()
			for _, pid := range pids {
				require.Eventually(t, func() bool { return errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH) }, 5*time.Second, 50*time.Millisecond,
					"process group %d is gone", pid)
			}
		})
	}
}

// runDemo runs the runner's loops while demo stages, waits and checks its
// rows, then stops the loops and returns the demo's report.
func runDemo(t *testing.T, r *local.Runner, demo *local.Demo) local.DemoReport {
	t.Helper()
	ctx := context.Background()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	rep, err := demo.Run(ctx, r, nil, false)
	require.NoError(t, err)
	stop()
	require.NoError(t, <-done)
	return rep
}

// TestStart_NamesTheTableAsTold: Options.Table (outflow local --table)
// names the outbox table, everything else keeping its run's prefix; a
// table of that name at the endpoint already is refused, not reused, for
// its rows and published configuration would be another run's.
func TestStart_NamesTheTableAsTold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, err := local.Start(ctx, local.Options{Template: template, Table: "my-outbox"})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, "my-outbox", r.Stack.Table)
	for _, fn := range []string{"SweepFunction", "WakeFunction"} {
		require.Equal(t, "my-outbox", r.Stack.Env[fn]["OUTFLOW_TABLE"], "%s delivers from the table named", fn)
	}
	_, err = dynamodb.NewFromConfig(r.AWS).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("my-outbox")})
	require.NoError(t, err, "the table is made under its name")

	_, err = local.Start(ctx, local.Options{Template: template, Endpoint: r.Endpoint, Table: "my-outbox"})
	require.ErrorContains(t, err, "table my-outbox exists at this endpoint already: outflow local makes its own table, so name another with --table, or drop --table for a new name each run")
}
