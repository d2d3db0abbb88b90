package dynamo_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// putItem writes a row by hand, as a producer in another language would:
// a due pending row at t0, changed by mutate.
func putItem(t *testing.T, st *dynamo.Store, key string, mutate func(map[string]types.AttributeValue)) {
	t.Helper()
	item := map[string]types.AttributeValue{
		"pk": s(key), "queue": s("orders"), "payload": s(`{"id":1}`), "status": s("pending"), "attempt": n(0),
		"created_at": n(t0.UnixMilli()), "due_at": n(t0.UnixMilli()), "shard": s(dynamo.ShardOf(key, st.Shards())),
	}
	mutate(item)
	_, err := awstest.DynamoDB(t).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(st.Table()), Item: item})
	require.NoError(t, err)
}

func TestStore_ClaimRefusesAndQuarantineTakesEveryMalformedShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	tests := []struct {
		name   string
		mutate func(map[string]types.AttributeValue)
		reason string
	}{
		{"attempt missing", func(it map[string]types.AttributeValue) { delete(it, "attempt") }, "missing attempt"},
		{"attempt null", func(it map[string]types.AttributeValue) { it["attempt"] = &types.AttributeValueMemberNULL{Value: true} }, "attempt must be a number, got NULL"},
		{"attempt a string", func(it map[string]types.AttributeValue) { it["attempt"] = s("zero") }, "attempt must be a number, got S"},
		{"attempt negative", func(it map[string]types.AttributeValue) { it["attempt"] = n(-1) }, "attempt must be in [0, 2147483647], got -1"},
		{"attempt huge", func(it map[string]types.AttributeValue) { it["attempt"] = &types.AttributeValueMemberN{Value: "1e30"} }, "attempt must be in"},
		{"status missing", func(it map[string]types.AttributeValue) { delete(it, "status") }, "missing status"},
		{"status unknown", func(it map[string]types.AttributeValue) { it["status"] = s("queued") }, `unknown status "queued"`},
		{"status a number", func(it map[string]types.AttributeValue) { it["status"] = n(1) }, "status must be a string, got N"},
		{"claimed, lease a string", func(it map[string]types.AttributeValue) {
			it["status"], it["lease_until"] = s("claimed"), s("later")
		}, "lease_until must be a number, got S"},
		{"claimed, lease in microseconds", func(it map[string]types.AttributeValue) {
			it["status"], it["lease_until"] = s("claimed"), n(t0.UnixMicro())
		}, "claimed with lease_until more than 2h0m0s past now"},
		{"claimed, lease huge", func(it map[string]types.AttributeValue) {
			it["status"], it["lease_until"] = s("claimed"), &types.AttributeValueMemberN{Value: "1e30"}
		}, "claimed with lease_until more than 2h0m0s past now"},
		{"done with index keys", func(it map[string]types.AttributeValue) { it["status"] = s("done") }, "done, yet still in the due index"},
		{"failed with index keys", func(it map[string]types.AttributeValue) { it["status"] = s("failed") }, "failed, yet still in the due index"},
	}
	for i, tt := range tests {
		key := "bad-" + strconv.Itoa(i)
		putItem(t, st, key, tt.mutate)
		_, err := st.Claim(ctx, key, t0.Add(lease*10), lease, maxAttempts)
		c := requireConflict(t, err)
		require.Contains(t, c.Malformed, tt.reason, tt.name)
		require.Nil(t, c.Current, tt.name)
		require.NoError(t, st.Quarantine(ctx, key, t0, "malformed: "+c.Malformed), tt.name)
		got, _ := st.Get(ctx, key)
		require.NotNil(t, got, tt.name)
		require.Equal(t, outbox.StatusFailed, got.Status, tt.name)
		require.Contains(t, got.LastError, tt.reason, tt.name)
	}
	require.Empty(t, awstest.DueKeys(t, st, t0.Add(lease*10)), "every malformed item left the due index")
	require.Len(t, deadKeys(t, st, "(none)"), len(tests))
}

func TestStore_QuarantineLeavesEveryValidShapeAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	valid := map[string]func(map[string]types.AttributeValue){
		"pending":           func(map[string]types.AttributeValue) {},
		"pending at budget": func(it map[string]types.AttributeValue) { it["attempt"] = n(maxAttempts) },
		"claimed under lease": func(it map[string]types.AttributeValue) {
			it["status"], it["lease_until"] = s("claimed"), n(t0.Add(lease).UnixMilli())
		},
		"claimed under the longest lease, skewed": func(it map[string]types.AttributeValue) {
			it["status"], it["lease_until"] = s("claimed"), n(t0.Add(2*outbox.MaxLease).UnixMilli())
		},
		"claimed without a lease": func(it map[string]types.AttributeValue) { it["status"] = s("claimed") },
		"fractional attempt":      func(it map[string]types.AttributeValue) { it["attempt"] = &types.AttributeValueMemberN{Value: "1.5"} },
		"done out of the index": func(it map[string]types.AttributeValue) {
			it["status"] = s("done")
			delete(it, "shard")
			delete(it, "due_at")
		},
		"created_at a string too": func(it map[string]types.AttributeValue) { it["created_at"] = s("yesterday") },
	}
	for name, mutate := range valid {
		putItem(t, st, name, mutate)
		before := storedItem(t, st, name)
		c := requireConflict(t, st.Quarantine(ctx, name, t0, "malformed"))
		require.Empty(t, c.Malformed, "%s: a valid row read as malformed", name)
		// The refusal is not enough: a quarantine that wrote and then
		// reported a conflict would pass it.
		require.Equal(t, before, storedItem(t, st, name), "%s: the quarantine changed a valid row", name)
	}
}

// storedItem reads an item as stored, every attribute.
func storedItem(t *testing.T, st *dynamo.Store, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := awstest.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(st.Table()), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{"pk": s(key)}})
	require.NoError(t, err)
	require.NotEmpty(t, out.Item, key)
	return out.Item
}

func TestStore_QuarantineKeepsTheStoredErrorHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	history := &types.AttributeValueMemberL{Value: []types.AttributeValue{
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"at": n(1), "attempt": n(1), "message": s("first")}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"at": n(2), "attempt": n(2), "message": s("second")}},
	}}
	putItem(t, st, "listed", func(it map[string]types.AttributeValue) {
		it["status"], it["errors"], it["last_error"] = s("done"), history, s("second")
	})
	putItem(t, st, "unlisted", func(it map[string]types.AttributeValue) {
		it["status"], it["errors"] = s("done"), s("kept as written")
	})

	require.NoError(t, st.Quarantine(ctx, "listed", t0, "malformed: done, yet still in the due index"))
	got, _ := st.Get(ctx, "listed")
	require.Equal(t, []string{"first", "second", "malformed: done, yet still in the due index"},
		[]string{got.Errors[0].Message, got.Errors[1].Message, got.Errors[2].Message})

	require.NoError(t, st.Quarantine(ctx, "unlisted", t0, "malformed: done, yet still in the due index"))
	out, err := awstest.DynamoDB(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{"pk": s("unlisted")}})
	require.NoError(t, err)
	require.Equal(t, s("kept as written"), out.Item[dynamo.AttrErrorsUnreadable])
	require.Equal(t, s("failed"), out.Item["status"])
}

// DynamoDB keeps 38 significant digits and refuses an update whose
// arithmetic needs more (a ValidationException): the claim's attempt + 1 on
// an attempt of 1E-38 or 1E-130 is such an update. server.py makes moto
// refuse it too. The claim dead-letters the row with DynamoDB's reason
// rather than fail on it as a plain error on every sweep.
func TestStore_ClaimDynamoDBRefusesDeadLettersTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	tests := []struct{ name, attempt string }{
		{"attempt 1E-38", "0.00000000000000000000000000000000000001"},
		{"attempt 1E-130", "1E-130"},
	}
	for _, tt := range tests {
		putItem(t, st, tt.name, func(it map[string]types.AttributeValue) {
			it["attempt"] = &types.AttributeValueMemberN{Value: tt.attempt}
		})
		row, err := st.Claim(ctx, tt.name, t0.Add(lease*10), lease, maxAttempts)
		require.ErrorIs(t, err, outbox.ErrDeadLettered, "%s: claimed, attempt reads back as %d (%q)", tt.name, row.Attempt, row.Malformed)
		got, _ := st.Get(ctx, tt.name)
		require.NotNil(t, got, tt.name)
		require.Equal(t, outbox.StatusFailed, got.Status, tt.name)
		require.Contains(t, got.LastError, "claim refused: Number overflow", tt.name)
	}
	require.Empty(t, awstest.DueKeys(t, st, t0.Add(lease*10)), "no refused row is left in the due index")
	require.Len(t, deadKeys(t, st, "orders"), len(tests))
}

func TestStore_ClaimTakesAClaimedRowWithNoLeaseAsLapsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	tests := []struct {
		name    string
		attempt int64
	}{
		{"below the budget", 1},
		{"at the budget", maxAttempts},
	}
	for _, tt := range tests {
		key := "no-lease-" + strconv.FormatInt(tt.attempt, 10)
		putItem(t, st, key, func(it map[string]types.AttributeValue) {
			it["status"], it["attempt"] = s("claimed"), n(tt.attempt)
		})
		row, err := st.Claim(ctx, key, t0, lease, maxAttempts)
		if tt.attempt >= maxAttempts {
			// Its budget is spent: the claim refuses it as a lapsed final
			// attempt, which the engine expires.
			c := requireConflict(t, err)
			require.Empty(t, c.Malformed, tt.name)
			require.NotNil(t, c.Current, tt.name)
			require.NoError(t, st.Expire(ctx, *c.Current, t0, maxAttempts, []outbox.AttemptError{{At: t0, Message: "lease expired on final attempt"}}), tt.name)
			got, _ := st.Get(ctx, key)
			require.Equal(t, outbox.StatusFailed, got.Status, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		require.Equal(t, int(tt.attempt)+1, row.Attempt, tt.name)
		require.Equal(t, t0.Add(lease), row.LeaseUntil, tt.name)
		// The claim it took now holds the row like any other.
		_, err = st.Claim(ctx, key, t0, lease, maxAttempts)
		requireConflict(t, err)
	}
}
