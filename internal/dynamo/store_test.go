package dynamo_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

const (
	lease       = time.Minute
	maxAttempts = 3
)

var t0 = time.UnixMilli(1_800_000_000_000)

func newStore(t *testing.T, retention time.Duration) *dynamo.Store {
	t.Helper()
	s, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: awstest.NewTable(t), Shards: 4, DoneRetention: retention})
	require.NoError(t, err)
	return s
}

func stage(t *testing.T, s *dynamo.Store, key string) outbox.Row {
	t.Helper()
	row := outbox.Row{Key: key, Queue: "orders", Payload: []byte(`{"id":1}`), Attributes: map[string]string{"type": "created"}}
	require.NoError(t, s.Stage(context.Background(), row, t0))
	got, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	return *got
}

func claim(t *testing.T, s *dynamo.Store, key string, now time.Time) outbox.Row {
	t.Helper()
	row, err := s.Claim(context.Background(), key, now, lease, maxAttempts)
	require.NoError(t, err)
	return row
}

func requireConflict(t *testing.T, err error) *outbox.ConflictError {
	t.Helper()
	var c *outbox.ConflictError
	require.ErrorAs(t, err, &c)
	return c
}

func get(t *testing.T, s *dynamo.Store, key string) *outbox.Row {
	t.Helper()
	row, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	return row
}

func TestStore_StageIsConditionalOnKey(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	row := stage(t, s, "k1")
	require.Equal(t, outbox.StatusPending, row.Status)
	require.Equal(t, 0, row.Attempt)
	require.Equal(t, t0, row.DueAt)
	require.Equal(t, map[string]string{"type": "created"}, row.Attributes)

	c := requireConflict(t, s.Stage(context.Background(), outbox.Row{Key: "k1", Queue: "other", Payload: []byte("x")}, t0))
	require.NotNil(t, c.Current)
	require.Equal(t, "orders", c.Current.Queue, "the existing row is reported, not overwritten")
}

func TestStore_StageDelayedRowIsDueAtNotBefore(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	later := t0.Add(time.Hour)
	require.NoError(t, s.Stage(context.Background(), outbox.Row{Key: "d", Queue: "q", Payload: []byte("x"), NotBefore: later}, t0))
	require.Equal(t, later, get(t, s, "d").DueAt)

	_, err := s.Claim(context.Background(), "d", t0, lease, maxAttempts)
	requireConflict(t, err)
	require.Equal(t, 1, claim(t, s, "d", later).Attempt)
}

func TestStore_ClaimGuards(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	stage(t, s, "k")

	first := claim(t, s, "k", t0)
	require.Equal(t, outbox.StatusClaimed, first.Status)
	require.Equal(t, 1, first.Attempt)
	require.NotEmpty(t, first.Token)
	require.Equal(t, t0.Add(lease), first.LeaseUntil)
	require.Equal(t, []byte(`{"id":1}`), first.Payload)

	// A live lease refuses a second claim and reports the holder.
	_, err := s.Claim(context.Background(), "k", t0.Add(lease/2), lease, maxAttempts)
	c := requireConflict(t, err)
	require.Equal(t, outbox.StatusClaimed, c.Current.Status)
	require.Equal(t, first.Token, c.Current.Token)

	// An expired lease can be claimed again, consuming another attempt.
	second := claim(t, s, "k", t0.Add(lease+time.Millisecond))
	require.Equal(t, 2, second.Attempt)
	require.NotEqual(t, first.Token, second.Token)

	third := claim(t, s, "k", t0.Add(3*lease))
	require.Equal(t, maxAttempts, third.Attempt)

	// At the budget, even an expired lease is not claimable.
	_, err = s.Claim(context.Background(), "k", t0.Add(10*lease), lease, maxAttempts)
	c = requireConflict(t, err)
	require.Equal(t, maxAttempts, c.Current.Attempt)

	// A missing row is a conflict with nothing current.
	_, err = s.Claim(context.Background(), "nope", t0, lease, maxAttempts)
	c = requireConflict(t, err)
	require.Nil(t, c.Current)
	require.Nil(t, get(t, s, "nope"), "a refused claim must not create an item")
}

func TestStore_SettlesNeedTheCurrentToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)
	stage(t, s, "k")
	row := claim(t, s, "k", t0)
	stale := row
	stale.Token = "not-the-token"
	hist := []outbox.AttemptError{{At: t0, Attempt: 1, Message: "boom"}}

	ops := map[string]func(outbox.Row) error{
		"done":        func(r outbox.Row) error { return s.Done(ctx, r, t0) },
		"retry":       func(r outbox.Row) error { return s.Retry(ctx, r, t0.Add(time.Second), hist) },
		"dead-letter": func(r outbox.Row) error { return s.DeadLetter(ctx, r, t0, hist) },
		"release":     func(r outbox.Row) error { return s.Release(ctx, r) },
	}
	for name, op := range ops {
		c := requireConflict(t, op(stale))
		require.Equal(t, name, c.Op)
		require.Equal(t, row.Token, c.Current.Token)
	}
	require.Equal(t, row, *get(t, s, "k"), "refused settles change nothing")

	require.NoError(t, s.Done(ctx, row, t0))
	require.Nil(t, get(t, s, "k"), "done deletes the row without retention")
	requireConflict(t, s.Done(ctx, row, t0))
}

func TestStore_DoneWithRetentionKeepsRowOutOfDueIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 24*time.Hour)
	stage(t, s, "k")
	require.NoError(t, s.Done(ctx, claim(t, s, "k", t0), t0))
	require.Equal(t, outbox.StatusDone, get(t, s, "k").Status)
	refs := awstest.DueKeys(t, s, t0.Add(time.Hour))
	require.Empty(t, refs)

	out, err := awstest.DynamoDB(t).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
	})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberN{Value: strconv.FormatInt(t0.Add(24*time.Hour).Unix(), 10)}, out.Item[dynamo.AttrExpiresAt])
}

func TestStore_RetryKeepsAttemptAndMovesDueTime(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	stage(t, s, "k")
	row := claim(t, s, "k", t0)
	due := t0.Add(30 * time.Second)
	hist := []outbox.AttemptError{{At: t0, Attempt: 1, Message: "throttled"}}
	require.NoError(t, s.Retry(context.Background(), row, due, hist))

	got := get(t, s, "k")
	require.Equal(t, outbox.StatusPending, got.Status)
	require.Equal(t, 1, got.Attempt)
	require.Equal(t, due, got.DueAt)
	require.Empty(t, got.Token)
	require.Equal(t, hist, got.Errors)
	require.Equal(t, "throttled", got.LastError)

	_, err := s.Claim(context.Background(), "k", due.Add(-time.Millisecond), lease, maxAttempts)
	requireConflict(t, err)
	require.Equal(t, 2, claim(t, s, "k", due).Attempt)
}

func TestStore_ReleaseRestoresTheAttempt(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	stage(t, s, "k")
	row := claim(t, s, "k", t0)
	require.NoError(t, s.Release(context.Background(), row))
	got := get(t, s, "k")
	require.Equal(t, outbox.StatusPending, got.Status)
	require.Equal(t, 0, got.Attempt)
	require.Equal(t, t0, got.DueAt)
	require.Equal(t, []string{"k"}, awstest.DueKeys(t, s, t0))
}

func TestStore_DeadLetterAndRedrive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)
	stage(t, s, "k")

	requireConflict(t, s.Redrive(ctx, "k", t0)) // only failed rows move

	row := claim(t, s, "k", t0)
	hist := []outbox.AttemptError{{At: t0, Attempt: 1, Message: "no route for queue \"orders\""}}
	require.NoError(t, s.DeadLetter(ctx, row, t0, hist))
	got := get(t, s, "k")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, t0, got.FailedAt)
	require.Equal(t, hist, got.Errors)
	require.Empty(t, awstest.DueKeys(t, s, t0.Add(time.Hour)), "a failed row leaves the due index")
	require.Equal(t, []string{"k"}, deadKeys(t, s, "orders"))

	later := t0.Add(time.Hour)
	require.NoError(t, s.Redrive(ctx, "k", later))
	got = get(t, s, "k")
	require.Equal(t, outbox.StatusPending, got.Status)
	require.Equal(t, 0, got.Attempt)
	require.Equal(t, later, got.DueAt)
	require.Equal(t, hist, got.Errors, "history survives a redrive")
	require.Empty(t, deadKeys(t, s, "orders"))
	require.Equal(t, []string{"k"}, awstest.DueKeys(t, s, later))
	requireConflict(t, s.Redrive(ctx, "k", later))
}

func TestStore_ExpireOnlyWhenFinalLeaseLapsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)
	stage(t, s, "k")
	var row outbox.Row
	for i := range maxAttempts {
		row = claim(t, s, "k", t0.Add(time.Duration(i)*2*lease))
	}
	final := row.LeaseUntil
	hist := []outbox.AttemptError{{Message: "lease expired on final attempt"}}

	// Live lease: not expirable.
	requireConflict(t, s.Expire(ctx, row, final.Add(-time.Second), maxAttempts, hist))
	// Below the budget: not expirable either.
	requireConflict(t, s.Expire(ctx, row, final.Add(time.Second), maxAttempts+1, hist))

	require.NoError(t, s.Expire(ctx, row, final.Add(time.Second), maxAttempts, hist))
	got := get(t, s, "k")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, "lease expired on final attempt", got.LastError)
	require.Equal(t, maxAttempts, got.Attempt)
	// The late holder can no longer settle.
	requireConflict(t, s.Done(ctx, row, final))
}

func TestStore_QueryDuePagesEachShardOldestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)
	const n = 40
	for i := range n {
		row := outbox.Row{Key: "k" + strconv.Itoa(i), Queue: "q", Payload: []byte("x"), NotBefore: t0.Add(time.Duration(i) * time.Second)}
		require.NoError(t, s.Stage(ctx, row, t0))
	}
	require.NoError(t, s.Stage(ctx, outbox.Row{Key: "future", Queue: "q", Payload: []byte("x"), NotBefore: t0.Add(time.Hour)}, t0))

	now := t0.Add(time.Minute)
	seen := map[string]bool{}
	for shard := range s.Shards() {
		var after *outbox.DueRef
		var last time.Time
		for {
			refs, more, err := s.QueryDue(ctx, shard, now, after, 3)
			require.NoError(t, err)
			require.LessOrEqual(t, len(refs), 3)
			for _, r := range refs {
				require.False(t, r.DueAt.Before(last), "oldest first")
				last = r.DueAt
				require.Equal(t, dynamo.ShardOf(r.Key, s.Shards()), strconv.Itoa(shard))
				require.Equal(t, t0, r.CreatedAt)
				require.False(t, seen[r.Key], "no entry twice")
				seen[r.Key] = true
			}
			if !more || len(refs) == 0 {
				break
			}
			after = &refs[len(refs)-1]
		}
	}
	require.Len(t, seen, n, "every due row once, the future row not at all")
	require.False(t, seen["future"])
}

func TestStore_QuarantineTouchesOnlyUnreadableItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)
	stage(t, s, "good")
	requireConflict(t, s.Quarantine(ctx, "good", t0, "malformed"))
	require.Equal(t, outbox.StatusPending, get(t, s, "good").Status)

	// A foreign item in the due index: right index keys, wrong state types.
	_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.Table()),
		Item: map[string]types.AttributeValue{
			"pk":      &types.AttributeValueMemberS{Value: "bad"},
			"shard":   &types.AttributeValueMemberS{Value: dynamo.ShardOf("bad", s.Shards())},
			"due_at":  &types.AttributeValueMemberN{Value: "1"},
			"status":  &types.AttributeValueMemberS{Value: "pending"},
			"attempt": &types.AttributeValueMemberS{Value: "zero"},
		},
	})
	require.NoError(t, err)
	_, err = s.Claim(ctx, "bad", t0, lease, maxAttempts)
	c := requireConflict(t, err)
	require.NotEmpty(t, c.Malformed)

	require.NoError(t, s.Quarantine(ctx, "bad", t0, "malformed: "+c.Malformed))
	require.Equal(t, []string{"good"}, awstest.DueKeys(t, s, t0.Add(time.Hour)), "the quarantined item left the due index")
	require.Equal(t, []string{"bad"}, deadKeys(t, s, "(none)"))
}

func TestStore_ClaimOfMalformedContentKeepsClaimWithReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 0)
	_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.Table()),
		Item: map[string]types.AttributeValue{
			"pk":         &types.AttributeValueMemberS{Value: "nopayload"},
			"queue":      &types.AttributeValueMemberS{Value: "q"},
			"shard":      &types.AttributeValueMemberS{Value: dynamo.ShardOf("nopayload", s.Shards())},
			"due_at":     &types.AttributeValueMemberN{Value: "1"},
			"status":     &types.AttributeValueMemberS{Value: "pending"},
			"attempt":    &types.AttributeValueMemberN{Value: "0"},
			"created_at": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	require.NoError(t, err)
	row := claim(t, s, "nopayload", t0)
	require.Contains(t, row.Malformed, "missing payload")
	require.NotEmpty(t, row.Token)
	require.NoError(t, s.DeadLetter(ctx, row, t0, []outbox.AttemptError{{Message: row.Malformed}}))
	got, err := s.Get(ctx, "nopayload")
	require.ErrorIs(t, err, dynamo.ErrMalformed, "Get still reports what is wrong")
	require.Equal(t, outbox.StatusFailed, got.Status)
	require.Equal(t, row.Malformed, got.LastError)
}

func deadKeys(t *testing.T, s *dynamo.Store, queue string) []string {
	t.Helper()
	out, err := awstest.DynamoDB(t).Query(context.Background(), &dynamodb.QueryInput{
		TableName:                 aws.String(s.Table()),
		IndexName:                 aws.String(dynamo.DeadIndex),
		KeyConditionExpression:    aws.String("dead_queue = :q"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":q": &types.AttributeValueMemberS{Value: queue}},
	})
	require.NoError(t, err)
	var keys []string
	for _, it := range out.Items {
		keys = append(keys, it["pk"].(*types.AttributeValueMemberS).Value)
	}
	return keys
}

func TestStore_ConcurrentClaimsOfOneRowHaveOneWinner(t *testing.T) {
	t.Parallel()
	s := newStore(t, 0)
	for round := range 20 {
		key := "race-" + strconv.Itoa(round)
		stage(t, s, key)
		var wg sync.WaitGroup
		var wins atomic.Int32
		for range 8 {
			wg.Go(func() {
				if _, err := s.Claim(context.Background(), key, t0, lease, maxAttempts); err == nil {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "round %d: exactly one claim wins", round)
	}
}
