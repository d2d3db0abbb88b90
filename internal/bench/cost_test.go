package bench

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"
)

func TestUsagePerMillion_PricesEveryLineAtItsPrice(t *testing.T) {
	t.Parallel()
	u := Usage{TableWRU: 3, IndexWRU: 2, RRU: 1, StreamReads: 0.5, SQSRequests: 0.1, SNSRequests: 0.2, EventBridgeEvents: 1, LambdaInvocations: 0.01, LambdaGBs: 0.001, SchedulerInvocations: 0.002, PipesRequests: 1}
	lines := u.PerMillion()
	want := []float64{3 * 0.625, 2 * 0.625, 0.125, 0.5 * 0.2, 0.1 * 0.40, 0.2 * 0.50, 1.00, 0.01 * 0.20, 0.001 * 0.0000133334 * 1e6, 0.002 * 1.00, 0.40}
	require.Len(t, lines, len(want))
	for i, l := range lines {
		require.Equal(t, LineNames[i], l.Name)
		require.InDelta(t, want[i], l.Dollars, 1e-9, l.Name)
	}
	sum := 0.0
	for _, w := range want {
		sum += w
	}
	require.InDelta(t, sum, Total(lines), 1e-9)
}

func TestQueryRRU_IsHalfAUnitPerStarted4KB(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		page, item int
		want       float64
	}{{1, 100, 0.5}, {10, 409, 0.5}, {10, 410, 1}, {100, 315, 4}} {
		t.Run(fmt.Sprintf("%dx%d", tc.page, tc.item), func(t *testing.T) {
			t.Parallel()
			require.InDelta(t, tc.want, QueryRRU(tc.page, tc.item), 1e-9)
		})
	}
}

func TestRefused_IsAConditionRefusedAloneOrInATransaction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"conditional check", fmt.Errorf("claim: %w", &types.ConditionalCheckFailedException{}), true},
		{"transaction, a condition", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("None")}, {Code: aws.String("ConditionalCheckFailed")}}}, true},
		{"transaction, a conflict", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}}}, false},
		{"throttled", &types.ProvisionedThroughputExceededException{}, false},
		{"other", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, refused(tc.err))
		})
	}
}

func TestWakeFilter_PassesOnlyInsertsOfPendingRows(t *testing.T) {
	t.Parallel()
	rec := func(name streamtypes.OperationType, status string) streamtypes.Record {
		return streamtypes.Record{EventName: name, Dynamodb: &streamtypes.StreamRecord{NewImage: map[string]streamtypes.AttributeValue{
			"status": &streamtypes.AttributeValueMemberS{Value: status},
		}}}
	}
	require.True(t, wakeFilter(rec(streamtypes.OperationTypeInsert, "pending")))
	require.False(t, wakeFilter(rec(streamtypes.OperationTypeInsert, "failed")))
	require.False(t, wakeFilter(rec(streamtypes.OperationTypeModify, "pending")))
	require.False(t, wakeFilter(streamtypes.Record{EventName: streamtypes.OperationTypeInsert}))
}

func TestWriteUnits_SplitsARowsWritesBetweenTableAndIndex(t *testing.T) {
	t.Parallel()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "r1"}}
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "r1"}, "shard": &types.AttributeValueMemberS{Value: "3"}}
	stage, dispatch := NewRequests(), NewRequests()
	stage.record("DynamoDB.PutItem", &dynamodb.PutItemInput{Item: item})
	dispatch.record("DynamoDB.UpdateItem", &dynamodb.UpdateItemInput{Key: key, ReturnValues: types.ReturnValueAllNew})
	dispatch.record("DynamoDB.DeleteItem", &dynamodb.DeleteItemInput{Key: key})
	table, index := writeUnits(1, stage, dispatch)
	require.InDelta(t, 3, table, 1e-9, "put, claim and delete: one unit each")
	require.InDelta(t, 2, index, 1e-9, "the put's and the delete's index entries; the claim moves none")
	require.Equal(t, 1, dataRequests(stage))
}

func TestUsageTo_BillsEachTargetByItsRule(t *testing.T) {
	t.Parallel()
	u := Usage{SQSRequests: 0.1}
	cases := []struct {
		target  Target
		dollars float64
	}{
		{TargetSQS, 0.1 * 0.40},
		{TargetSQSFIFO, 0.1 * 0.50},
		{TargetSNS, 0.1 * 0.50},   // a PublishBatch is billed as one request per 64 KB chunk
		{TargetEventBridge, 1.00}, // every PutEvents entry is an event
	}
	for _, c := range cases {
		require.InDelta(t, c.dollars, Total(u.To(c.target).PerMillion()), 1e-9, string(c.target))
	}
}

func TestInTransaction_DoublesTheStagingPutsTableUnits(t *testing.T) {
	t.Parallel()
	u := Usage{TableWRU: 3, IndexWRU: 2, StageTableWRU: 1}.InTransaction()
	require.InDelta(t, 4, u.TableWRU, 1e-9)
	require.InDelta(t, 2, u.IndexWRU, 1e-9, "the index write is propagated after the commit, once")
}

func TestWriteUnitsBySize_GivesTheMeasuredFiguresAndGrowsWithTheItem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		bytes             int
		ordered, transact bool
		want              float64
	}{
		{315, false, false, 5}, // benchmarks.md: unordered, measured
		{315, true, false, 8},  // ordered, measured
		{315, false, true, 6},
		{315, true, true, 8},
		{4000, false, false, 16}, // put 4, claim 5, done 5, index 2
		{4000, true, false, 22},  // put 8, group 2, claim 5, done 5, index 2
		{4000, false, true, 20},
	}
	for _, c := range cases {
		table, index := WriteUnitsBySize(c.bytes, c.ordered, c.transact)
		require.InDelta(t, c.want, table+index, 1e-9, "%d bytes, ordered %v, transact %v", c.bytes, c.ordered, c.transact)
	}
}

func TestScanRRU_IsHalfAUnitPerStarted4KBOfThePage(t *testing.T) {
	t.Parallel()
	require.InDelta(t, 0.5, ScanRRU(0, false), 1e-9, "an empty page still reads")
	require.InDelta(t, 0.5, ScanRRU(4096, false), 1e-9)
	require.InDelta(t, 1, ScanRRU(4097, false), 1e-9)
	require.InDelta(t, 38.5, ScanRRU(315*1000, false), 1e-9, "a page of 1,000 items of 315 bytes: 77 started 4 KB")
	require.InDelta(t, 77, ScanRRU(315*1000, true), 1e-9)
}

func TestBackstopModel_CapsASweepsReadsAndGrowsThePass(t *testing.T) {
	t.Parallel()
	m := BackstopModel{ItemBytes: 350, RRUPerItem: 0.043, Pages: 4, PageSize: 1000, ReadsPerRun: 1, SavesPerRun: 1,
		Period: time.Minute, Grace: 15 * time.Second}
	small, big := m, m
	small.Items, big.Items = 2500, 1_000_000
	require.Equal(t, 3, small.PagesPerPass())
	require.Equal(t, 1, small.RunsPerPass(), "one sweep reads the whole table")
	require.InDelta(t, 2500*0.043+1, small.RRUPerRun(), 1e-9)
	require.Equal(t, 1000, big.PagesPerPass())
	require.Equal(t, 250, big.RunsPerPass())
	require.InDelta(t, 4000*0.043+1, big.RRUPerRun(), 1e-9, "four full pages a sweep")
	require.Equal(t, 15*time.Second+250*time.Minute+time.Minute, big.LongestWait())
	perHour := 60 * ((4000*0.043+1)*0.125 + 0.625) / 1e6
	require.InDelta(t, perHour, big.DollarsPerHour(), 1e-12)
	require.InDelta(t, perHour/(10*3600)*1e6, big.PerMillion(10), 1e-12)

	empty := m
	require.Equal(t, 1, empty.PagesPerPass(), "an empty table is still a page")
	require.InDelta(t, 0.5+1, empty.RRUPerRun(), 1e-9, "a page's least: half a unit")

	large := m
	large.Items, large.ItemBytes = 10_000, 4000
	require.Equal(t, 262, large.ItemsPerPage(), "a page ends at 1 MB")
}

func TestStoragePerMillion_IsTheItemAndItsOverheadForTheRetention(t *testing.T) {
	t.Parallel()
	// A million 924-byte items (1,024 with the overhead) kept 30 days.
	require.InDelta(t, 1e6*1024/float64(1<<30)*0.25, StoragePerMillion(924, 30*24*time.Hour), 1e-9)
	require.InDelta(t, 1e6*1024/float64(1<<30)*0.25/30, StoragePerMillion(924, 24*time.Hour), 1e-9)
}
