package dynamo_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// countingAPI is the test endpoint's client, counting the audit's scans
// and the keys it writes. A fault set for a key runs before the first
// update of it, and the error it returns is that update's.
type countingAPI struct {
	*dynamodb.Client
	mu     sync.Mutex
	scans  int
	writes []string
	faults map[string]func() error
}

// errTooLarge is how DynamoDB refuses an update past its item size limit.
var errTooLarge = &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size to update has exceeded the maximum allowed size"}

func (c *countingAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.mu.Lock()
	c.scans++
	c.mu.Unlock()
	return c.Client.Scan(ctx, in, opts...)
}

func (c *countingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	key := in.Key[dynamo.AttrKey].(*types.AttributeValueMemberS).Value
	c.mu.Lock()
	c.writes = append(c.writes, key)
	fault := c.faults[key]
	delete(c.faults, key)
	c.mu.Unlock()
	if fault != nil {
		if err := fault(); err != nil {
			return nil, err
		}
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

func (c *countingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.mu.Lock()
	c.writes = append(c.writes, in.Item[dynamo.AttrKey].(*types.AttributeValueMemberS).Value)
	c.mu.Unlock()
	return c.Client.PutItem(ctx, in, opts...)
}

func (c *countingAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.mu.Lock()
	c.writes = append(c.writes, in.Key[dynamo.AttrKey].(*types.AttributeValueMemberS).Value)
	c.mu.Unlock()
	return c.Client.DeleteItem(ctx, in, opts...)
}

// take returns the scans and written keys counted since the last take.
func (c *countingAPI) take() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	scans, writes := c.scans, c.writes
	c.scans, c.writes = 0, nil
	return scans, writes
}

// newAudit is a store of 4 shards on a fresh table and an audit of it
// through a counting client, with the given budget.
func newAudit(t *testing.T, pages, pageSize int) (*dynamo.Store, *dynamo.Audit, *countingAPI) {
	t.Helper()
	st := newStore(t, 0)
	api := &countingAPI{Client: awstest.DynamoDB(t), faults: map[string]func() error{}}
	a, err := dynamo.NewAudit(api, dynamo.Config{Table: st.Table(), Shards: st.Shards()})
	require.NoError(t, err)
	a.Pages, a.PageSize = pages, pageSize
	return st, a, api
}

// putShard writes a due pending row by hand with the given shard.
func putShard(t *testing.T, st *dynamo.Store, key, shard string) {
	t.Helper()
	putItem(t, st, key, func(it map[string]types.AttributeValue) { it["shard"] = s(shard) })
}

func TestAudit_MovesEveryStrayRowToItsKeysShardAndNoOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, api := newAudit(t, 1, 100)
	require.Equal(t, 4, st.Shards())
	strays := map[string]string{"past-count": "7", "not-a-number": "x", "negative": "-1", "zero-padded": "04", "signed": "+1", "empty": " "}
	for key, shard := range strays {
		putShard(t, st, key, shard)
	}
	// Valid: every swept shard, whatever the key hashes to (a row staged
	// before the shard count grew keeps its lower shard).
	for i := range 4 {
		putShard(t, st, "valid-"+strconv.Itoa(i), strconv.Itoa(i))
	}
	api.take()

	res, err := a.Run(ctx, t0)
	require.NoError(t, err)
	require.True(t, res.PassDone)
	require.Equal(t, len(strays)+4, res.Scanned)
	require.Equal(t, len(strays), res.Moved, "%+v", res.Found)
	found := map[string]string{}
	for _, f := range res.Found {
		require.Equal(t, "moved", f.Outcome, f.Key)
		found[f.Key] = f.Shard
	}
	require.Equal(t, strays, found)

	scans, writes := api.take()
	require.Equal(t, 1, scans)
	want := []string{dynamo.AuditKey}
	for key := range strays {
		want = append(want, key)
	}
	require.ElementsMatch(t, want, writes, "one move per stray row and the audit's own item; no valid row written")
	// Each is now where the sweep looks, and claimable.
	due := awstest.DueKeys(t, st, t0)
	for key := range strays {
		require.Contains(t, due, key)
		claim(t, st, key, t0)
	}
	counts, err := st.Audited(ctx)
	require.NoError(t, err)
	require.Equal(t, dynamo.AuditCounts{LastPass: len(strays), Total: len(strays)}, counts)
}

func TestAudit_WritesNothingOnAHealthyTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name     string
		pageSize int
		// itemWrites is the most writes of the audit item a run may make:
		// none when one page covers the index, one to move its place on.
		itemWrites int
	}{
		{"one page covers the index", 100, 0},
		{"many pages", 7, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, a, api := newAudit(t, 1, tt.pageSize)
			for i := range 30 {
				stage(t, st, fmt.Sprintf("row-%d", i))
			}
			api.take()
			for range 12 {
				res, err := a.Run(ctx, t0)
				require.NoError(t, err)
				require.Empty(t, res.Found)
				scans, writes := api.take()
				require.Equal(t, 1, scans)
				require.LessOrEqual(t, len(writes), tt.itemWrites, writes)
				for _, k := range writes {
					require.Equal(t, dynamo.AuditKey, k, "a valid row was written")
				}
			}
		})
	}
}

func TestAudit_ResumesAcrossRunsWithinItsBudgetUntilTheIndexIsCovered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct{ pages, pageSize int }{{1, 3}, {2, 4}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d pages of %d", tt.pages, tt.pageSize), func(t *testing.T) {
			t.Parallel()
			st, a, api := newAudit(t, tt.pages, tt.pageSize)
			strays := map[string]bool{}
			for i := range 40 {
				key := fmt.Sprintf("row-%d", i)
				if i%5 == 0 {
					putShard(t, st, key, "9")
					strays[key] = true
					continue
				}
				stage(t, st, key)
			}
			api.take()
			found := map[string]int{}
			runs, scanned := 0, 0
			for done := false; !done; runs++ {
				require.Less(t, runs, 40, "the pass never ended")
				res, err := a.Run(ctx, t0)
				require.NoError(t, err)
				scans, _ := api.take()
				require.LessOrEqual(t, scans, tt.pages, "run %d", runs)
				require.Equal(t, scans, res.Pages)
				scanned += res.Scanned
				for _, f := range res.Found {
					found[f.Key]++
				}
				done = res.PassDone
			}
			// A page that ends inside a swept shard skips the rest of it,
			// so a pass reads each entry at most once, and may read fewer.
			require.LessOrEqual(t, scanned, 40, "one pass reads each entry at most once")
			require.Len(t, found, len(strays))
			for key := range strays {
				require.Equal(t, 1, found[key], key)
			}
			counts, err := st.Audited(ctx)
			require.NoError(t, err)
			require.Equal(t, dynamo.AuditCounts{LastPass: len(strays), Total: len(strays)}, counts)
			// The next pass starts again and finds nothing: all were moved.
			res, err := a.Run(ctx, t0)
			require.NoError(t, err)
			require.Empty(t, res.Found)
		})
	}
}

func TestAudit_DeadLettersAStrayRowItCannotMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, api := newAudit(t, 1, 100)
	putShard(t, st, "too-big", "7")
	api.faults["too-big"] = func() error { return errTooLarge }
	res, err := a.Run(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLettered, "%+v", res.Found)
	require.Contains(t, res.Found[0].Error, "item too large: move to its shard")
	got := get(t, st, "too-big")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, "item too large: move to its shard", got.LastError)
	require.Contains(t, deadKeys(t, st, "orders"), "too-big")
	require.NotContains(t, awstest.DueKeys(t, st, t0), "too-big")
}

func TestAudit_LeavesARowThatChangedSinceTheScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, api := newAudit(t, 1, 100)
	putShard(t, st, "raced", "7")
	// Between the scan and the move, another writer sets its shard (a
	// concurrent audit, or the producer writing the row again): the move's
	// condition, the shard as read, refuses it.
	api.faults["raced"] = func() error {
		_, err := api.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{"pk": s("raced")},
			UpdateExpression: aws.String("SET #s = :s"), ExpressionAttributeNames: map[string]string{"#s": "shard"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("2")},
		})
		return err
	}
	res, err := a.Run(ctx, t0)
	require.NoError(t, err)
	require.Empty(t, res.Found, "the other writer resolved it: not this run's find")
	require.Equal(t, 1, res.Changed)
	out, err := api.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{"pk": s("raced")}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, s("2"), out.Item["shard"], "the other writer's shard stands")
}

// Two sweeps overlap (the scheduled one and `outflow sweep`, or a retried
// invocation): both scan the same stray row, one moves it, the other's
// move is refused ("changed"). Invariant: the row counts once, in Found,
// in the StrayRows metric (Strays) and in stats, which agree; the loser
// counts it only as Changed (found by review 13b).
func TestAudit_CountsAStrayRowOnceWhenTwoRunsOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, api := newAudit(t, 1, 100)
	other, err := dynamo.NewAudit(awstest.DynamoDB(t), dynamo.Config{Table: st.Table(), Shards: st.Shards()})
	require.NoError(t, err)
	putShard(t, st, "one-stray", "7")
	var otherRes dynamo.AuditResult
	// The other sweep's audit runs whole between this one's scan and its move.
	api.faults["one-stray"] = func() error {
		var err error
		otherRes, err = other.Run(ctx, t0)
		return err
	}
	res, err := a.Run(ctx, t0)
	require.NoError(t, err)
	counts, err := st.Audited(ctx)
	require.NoError(t, err)
	found := len(res.Found) + len(otherRes.Found)
	metric := res.Strays() + otherRes.Strays() // the handler's StrayRows
	t.Logf("this run %+v, other run %+v, stats %+v", res.Found, otherRes.Found, counts)
	require.Equal(t, 1, found, "one stray row: Found summed over the two sweeps is %d, stats total %d", found, counts.Total)
	require.Equal(t, 1, metric, "one stray row: StrayRows summed over the two sweeps")
	require.Equal(t, 1, counts.Total, "stats")
	require.Equal(t, 1, res.Changed, "the run whose move was refused")
}

// A swept shard ahead of the stray one in scan order keeps a refilled
// backlog larger than the page budget: each run reads PageSize entries of
// shard "0", the sweep delivers the oldest ones behind the cursor and
// producers stage new ones (due_at = now) ahead of it. A page that ends
// inside a swept shard skips the rest of it, so the pass goes on to shard
// "x". Invariant: nothing sits unseen for ever; one busy shard never holds
// others up (found by review 13b).
func TestAudit_EndsItsPassBehindAShardThatKeepsFilling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, _ := newAudit(t, 1, 2)
	db := awstest.DynamoDB(t)
	putShard(t, st, "stray", "x")
	next := 0
	var live []string
	stageOn0 := func() {
		key := fmt.Sprintf("busy-%04d", next)
		putItem(t, st, key, func(it map[string]types.AttributeValue) {
			it["shard"], it["due_at"] = s("0"), n(t0.UnixMilli()+int64(next))
		})
		live = append(live, key)
		next++
	}
	for range 4 {
		stageOn0()
	}
	found := false
	for range 30 {
		res, err := a.Run(ctx, t0)
		require.NoError(t, err)
		for _, f := range res.Found {
			found = found || f.Key == "stray"
		}
		if found {
			break
		}
		// The sweep delivers the three oldest rows; producers stage three.
		for _, key := range live[:3] {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{"pk": s(key)}})
			require.NoError(t, err)
		}
		live = live[3:]
		for range 3 {
			stageOn0()
		}
	}
	counts, err := st.Audited(ctx)
	require.NoError(t, err)
	require.True(t, found, "30 audit runs over an index of at most %d entries never reached the stray row; audit item %+v", len(live)+1, counts)
}

// A move that fails (throttled, a timeout) is an "error" outcome, Run
// returns its error, and the saved place stays before the row, so the next
// run reads it again. Invariant: errors say truthfully what happened; one
// failed request does not leave a row unseen for a pass (found by review
// 13b).
func TestAudit_ReturnsAFailedMoveAndRetriesItNextRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, api := newAudit(t, 1, 1)
	// "+1" sorts first in the test endpoint's scan order, then two rows
	// on swept shards.
	putShard(t, st, "stray", "+1")
	putShard(t, st, "ok-0", "0")
	putShard(t, st, "ok-1", "1")
	api.faults["stray"] = func() error {
		return &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}
	}
	res, err := a.Run(ctx, t0)
	require.Len(t, res.Found, 1)
	require.Equal(t, "error", res.Found[0].Outcome, "%+v", res.Found)
	runErr := err
	res, err = a.Run(ctx, t0)
	require.NoError(t, err)
	retried := len(res.Found) == 1 && res.Found[0].Key == "stray"
	require.True(t, runErr != nil && retried,
		"the failed move: Run returned %v; the next run found %+v (scanned %d) instead of retrying it", runErr, res.Found, res.Scanned)
	var throttled *types.ProvisionedThroughputExceededException
	require.ErrorAs(t, runErr, &throttled, "the move's own error, wrapped")
	require.Equal(t, "moved", res.Found[0].Outcome)
}

// The audit moves its stray rows first and records them in its item last.
// The moved rows are on swept shards now, so no later run finds them
// again: when the save fails (throttled), their total goes in on its own,
// unconditionally. Invariant: counts/stats tell the truth; `outflow stats`
// agrees with the StrayRows metric (found by review 13b).
func TestAudit_KeepsTheTotalOfMovedRowsWhenItsSaveFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, api := newAudit(t, 1, 100)
	putShard(t, st, "stray-a", "7")
	putShard(t, st, "stray-b", "x")
	api.faults[dynamo.AuditKey] = func() error {
		return &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}
	}
	res, err := a.Run(ctx, t0)
	require.Error(t, err, "the save failed")
	require.Equal(t, 2, res.Moved, "%+v", res.Found)
	_, err = a.Run(ctx, t0)
	require.NoError(t, err)
	counts, err := st.Audited(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, counts.Total, "two stray rows moved (the metric said 2); stats: %+v", counts)
}
