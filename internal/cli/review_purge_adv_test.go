package cli_test

// Adversarial review of the purge hold (71ba2ec).

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// advUnsureDead makes key a dead letter whose send ended unsure 10 s ago.
func advUnsureDead(t *testing.T, e *env, key string) time.Time {
	t.Helper()
	ctx := context.Background()
	unsureAt := time.Now().Add(-10 * time.Second).Truncate(time.Millisecond)
	require.NoError(t, e.store.Stage(ctx, outbox.Row{Key: key, Queue: "orders", Payload: []byte(`{}`)}, unsureAt))
	row, err := e.store.Claim(ctx, key, unsureAt, time.Minute, 1)
	require.NoError(t, err)
	row.UnsureAt = unsureAt
	require.NoError(t, e.store.DeadLetter(ctx, row, unsureAt, []outbox.AttemptError{{At: unsureAt, Attempt: 1, Message: "send: timeout", Unsure: true}}))
	return unsureAt
}

// publishWithRawWait publishes a configuration, then sets its
// unsure_wait_ms to v as a stray writer might.
func publishWithRawWait(t *testing.T, e *env, v ddbtypes.AttributeValue) {
	t.Helper()
	ctx := context.Background()
	_, err := dynamo.Publish(ctx, awstest.DynamoDB(t), e.table, dynamo.Published{
		Routes: map[string]string{"orders": e.orders}, Ordered: map[string]string{}, Shards: 4, MaxMessageBytes: 262144, UnsureWait: 5 * time.Second,
	}, "outflow-sweep", time.Now())
	require.NoError(t, err)
	_, err = awstest.DynamoDB(t).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(e.table), Key: map[string]ddbtypes.AttributeValue{dynamo.AttrKey: &ddbtypes.AttributeValueMemberS{Value: dynamo.ConfigKey}},
		UpdateExpression:          aws.String("SET #w = :v"),
		ExpressionAttributeNames:  map[string]string{"#w": dynamo.AttrUnsureWait},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": v},
	})
	require.NoError(t, err)
}

// ATTACK (invariant 1): a published unsure_wait_ms too large for a
// time.Duration in ns. decodePublished multiplies without a bound, and
// 18446744073710 ms wraps to 448 µs: the purge deletes a dead letter 10 s
// after its unsure send. A wait that does not fit should read as the
// longest (or be refused), never as less than a minute.
func TestAdv_AnOverflowingPublishedUnsureWaitDoesNotPurgeAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	advUnsureDead(t, e, "timed-out")
	publishWithRawWait(t, e, &ddbtypes.AttributeValueMemberN{Value: "18446744073710"})
	pub, err := dynamo.ReadPublished(context.Background(), awstest.DynamoDB(t), e.table)
	require.NoError(t, err)
	t.Logf("unsure_wait_ms 18446744073710 reads as %s", pub.UnsureWait)

	out := e.ok(t, "dead", "purge", "timed-out", "--yes")
	t.Log(out)
	require.Equal(t, outbox.StatusFailed, e.status(t, "timed-out"), "purged 10 s after an unsure send")
}

// HOLDS? zero and negative published waits read as absent: the longest.
func TestAdv_AZeroOrNegativePublishedUnsureWaitHoldsTheLongest(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "-5"} {
		e := newEnv(t)
		advUnsureDead(t, e, "timed-out")
		publishWithRawWait(t, e, &ddbtypes.AttributeValueMemberN{Value: v})
		out := e.ok(t, "dead", "purge", "timed-out", "--yes")
		require.Contains(t, out, "held 1", v)
		require.Equal(t, outbox.StatusFailed, e.status(t, "timed-out"))
	}
}

// ATTACK (invariant 3): a field the producer never uses, of the wrong
// type (a string), makes every reader of the published configuration
// fail: a producer's LoadPublished, outflow config, and the purge itself;
// and the dispatchers' Publish cannot put a good item back, since it
// reads first and stops on the error. An optional field read leniently
// (as published_by is) would leave producers working.
func TestAdv_AStrayUnsureWaitDoesNotBreakProducersOrPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	publishWithRawWait(t, e, &ddbtypes.AttributeValueMemberS{Value: "159334"})

	_, perr := outflow.LoadPublished(ctx, awstest.DynamoDB(t), e.table)
	wrote, err := dynamo.Publish(ctx, awstest.DynamoDB(t), e.table, dynamo.Published{
		Routes: map[string]string{"orders": e.orders}, Ordered: map[string]string{}, Shards: 4, MaxMessageBytes: 262144, UnsureWait: 159334 * time.Millisecond,
	}, "outflow-sweep", time.Now())
	t.Logf("producer LoadPublished: %v; dispatcher Publish: wrote=%v err=%v", perr, wrote, err)
	require.NoError(t, perr, "a producer cannot load the published configuration")
	require.NoError(t, err, "the dispatcher cannot republish over it")
}

// ATTACK (invariant 1): no valid dispatcher has an unsure wait under
// MinCallTimeout + UnsureMargin (61 s), yet a published 1 ms is taken as
// is, and a dead letter 10 s past its unsure send is purged.
func TestAdv_APublishedUnsureWaitBelowAnyValidDispatchersIsNotTrusted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	advUnsureDead(t, e, "timed-out")
	publishWithRawWait(t, e, &ddbtypes.AttributeValueMemberN{Value: "1"})
	out := e.ok(t, "dead", "purge", "timed-out", "--yes")
	t.Log(out)
	require.Equal(t, outbox.StatusFailed, e.status(t, "timed-out"), "purged 10 s after an unsure send on a published wait of 1 ms")
}
