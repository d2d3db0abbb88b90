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
	due := dueKeys(t, st, t0)
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
			require.Equal(t, 40, scanned, "one pass reads each entry once")
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
	require.NotContains(t, dueKeys(t, st, t0), "too-big")
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
	require.Len(t, res.Found, 1)
	require.Equal(t, "changed", res.Found[0].Outcome)
	out, err := api.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{"pk": s("raced")}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, s("2"), out.Item["shard"], "the other writer's shard stands")
}
