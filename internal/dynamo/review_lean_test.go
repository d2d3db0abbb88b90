package dynamo_test

import (
	"context"
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

// TestReviewLean_AStaleProducersRowTheStreamMissedIsFoundAfterASwitchOff:
// docs/architecture.md, "Switching the mode": off, "a producer started
// before still stages lean rows until it restarts, and the wake delivers
// them as before. So the backstop keeps running for OUTFLOW_BACKSTOP_DRAIN
// (7 days) after lean was last on or it last found a row". But the drain
// is anchored to the backstop's own runs: lean_at moves only when a
// backstop run saw lean on or *found* a row. The lean rows the wake
// delivers (the normal case) never extend it, and lean on between two
// scheduled sweeps (the wake publishes it too) never starts it. Either
// way a stale producer keeps staging lean rows with no backstop behind
// them, and the first whose stream record is lost (mapping disabled
// > 24 h, a batch out of retries) stays pending with no shard for ever:
// no sweep, audit, wake or backstop ever sees it again.
func TestReviewLean_AStaleProducersRowTheStreamMissedIsFoundAfterASwitchOff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// leanRuns are the times the backstop ran with lean on.
		leanRuns []time.Time
		// staged is when the stale producer stages the row whose record
		// the stream loses.
		staged time.Time
	}{
		{"the producer outlives the drain (8 days, not restarted)", []time.Time{t0}, t0.Add(8 * 24 * time.Hour)},
		{"lean was on only between two scheduled sweeps", nil, t0.Add(time.Hour)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, s, _ := newBackstop(t)
			require.Zero(t, b.Drain, "the default: for ever")
			for _, at := range tc.leanRuns {
				_, err := b.Run(ctx, at)
				require.NoError(t, err)
			}
			if tc.leanRuns == nil {
				// The function that published lean noted it.
				require.NoError(t, s.NoteLean(ctx, t0))
			}
			b.Lean = false // switched off; a producer that loaded it on stages on
			stageLean(t, s, "stale-producer-row", tc.staged)
			for _, after := range []time.Duration{time.Minute, time.Hour, 30 * 24 * time.Hour} {
				_, err := b.Run(ctx, tc.staged.Add(after))
				require.NoError(t, err)
			}
			got := get(t, s, "stale-producer-row")
			require.Equal(t, outbox.StatusPending, got.Status)
			require.False(t, got.Unindexed, "a lean row the stream missed must end in the due index, whatever the drain says")
		})
	}
}

// TestReviewLean_TheBackstopFindsAPendingRowWithNoShardWhateverItsCreatedAt:
// the backstop's filter is `created_at < now - grace`, which is false for
// an item with no created_at, or one of another type. Such an item with no
// shard (written by hand, or by a producer outside Outflow: the case
// shardIfMissing's comment names) is pending and in no index: if its
// stream record is missed, nothing finds it. "Nothing blocks: an item
// that is not a valid row is dead-lettered with its reason" (guarantees);
// the wake itself would claim it and dead-letter it ("a bad created_at").
func TestReviewLean_TheBackstopFindsAPendingRowWithNoShardWhateverItsCreatedAt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		created types.AttributeValue // nil: none
	}{
		{"no created_at", nil},
		{"created_at as a string", &types.AttributeValueMemberS{Value: "2027-01-15T08:00:00Z"}},
		{"created_at as a numeric string", &types.AttributeValueMemberS{Value: "1800000000000"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, s, _ := newBackstop(t)
			item := map[string]types.AttributeValue{
				dynamo.AttrKey:     &types.AttributeValueMemberS{Value: "handwritten"},
				dynamo.AttrQueue:   &types.AttributeValueMemberS{Value: "orders"},
				dynamo.AttrPayload: &types.AttributeValueMemberS{Value: "{}"},
				dynamo.AttrStatus:  &types.AttributeValueMemberS{Value: "pending"},
				dynamo.AttrAttempt: &types.AttributeValueMemberN{Value: "0"},
				dynamo.AttrDueAt:   &types.AttributeValueMemberN{Value: "1800000000000"},
			}
			if tc.created != nil {
				item[dynamo.AttrCreatedAt] = tc.created
			}
			_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: item})
			require.NoError(t, err)

			res, err := b.Run(ctx, t0.Add(time.Hour))
			require.NoError(t, err, "%+v", res)
			require.Equal(t, []string{"handwritten"}, res.Keys, "a pending item with no shard is found, so the sweep dead-letters it with its reason")
		})
	}
}

// TestReviewLean_OneItemWithAStringCreatedAtStopsTheWholeBackstopOnMoto:
// moto answers a Scan whose filter compares a string created_at with a
// number with a 500 (real DynamoDB evaluates it false), so on the moto
// stack (make run, docs/local.md) one such pending item with no shard
// (a foreign producer's, by hand) anywhere in the table
// wedges the backstop at its page for good: every run fails there, the
// cursor never moves, and every genuine lean row the stream missed is
// never found. The claim and quarantine conditions guard their
// comparisons with attribute_type for exactly this (Store.Claim's
// comment); the backstop's filter does not.
func TestReviewLean_OneItemWithAStringCreatedAtStopsTheWholeBackstopOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := newBackstop(t)
	stageLean(t, s, "victim", t0)
	_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		dynamo.AttrKey:       &types.AttributeValueMemberS{Value: "foreign"},
		dynamo.AttrQueue:     &types.AttributeValueMemberS{Value: "orders"},
		dynamo.AttrPayload:   &types.AttributeValueMemberS{Value: "{}"},
		dynamo.AttrStatus:    &types.AttributeValueMemberS{Value: "pending"},
		dynamo.AttrAttempt:   &types.AttributeValueMemberN{Value: "0"},
		dynamo.AttrDueAt:     &types.AttributeValueMemberN{Value: "1800000000000"},
		dynamo.AttrCreatedAt: &types.AttributeValueMemberS{Value: "yesterday"},
	}})
	require.NoError(t, err)
	var found []string
	for i := range 3 {
		res, _ := b.Run(ctx, t0.Add(time.Duration(i+1)*time.Minute))
		found = append(found, res.Keys...)
	}
	require.ElementsMatch(t, []string{"foreign", "victim"}, found, "one hand-written pending item with a string created_at must not hide every missed lean row; it is found itself, for the sweep to dead-letter")
}
