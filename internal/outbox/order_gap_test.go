package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Review 12c: a seq gap written by a producer in another language.
//
// docs/architecture.md: "A producer in another language writes the same two
// items", and issue 12 names the producer-supplied sequence (the aggregate's
// version, as Row.Seq) as a key it may use, gaps included. Group g holds A
// (seq 5, the first row) and B (prev A, seq 7: version 6 was never
// published). The 12b place check reads "the predecessor's place is
// ref.Seq-1" as "any other place means the key was delivered and staged
// again", so it takes A (seq 5, pending, in this very run) for a row staged
// again, and lets B go at once: holds() is false (5 != 6), prevGate turns
// the pending A into Link{} (gone), and B is claimed and sent while A's
// first send is failing.
//
// A key staged again always sits at a LATER place than the row its
// successor names (the tail only grows); a predecessor found at an EARLIER
// place is the very row, with a gap behind it, not a stranger.
//
// Violated: invariant 1 (row n+1 handed to the deliverer before row n is
// settled). Expected: B is not sent while A is pending; suggested fix:
// treat the key as another row only when its seq is greater than
// ref.Seq-1 (in prevGate, holds and settledRow.lets), and wait otherwise.
func TestOrdered_ASeqGapFromAForeignProducerDoesNotLetTheSuccessorPassItsPendingPredecessor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	put := func(key, prev, seq string) {
		item := rawItem(h, key, func(it map[string]types.AttributeValue) {
			it[dynamo.AttrQueue] = &types.AttributeValueMemberS{Value: "events.fifo"}
			it[dynamo.AttrGroup] = &types.AttributeValueMemberS{Value: "g"}
			it[dynamo.AttrSeq] = &types.AttributeValueMemberN{Value: seq}
			if prev != "" {
				it[dynamo.AttrPrev] = &types.AttributeValueMemberS{Value: prev}
			}
		})
		_, err := awstest.DynamoDB(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(h.store.Table()), Item: item})
		require.NoError(t, err)
	}
	put("A", "", "5")
	put("B", "A", "7")

	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		if r.Key == "A" {
			return errors.New("injected: try again")
		}
		return nil
	}}
	e := h.engine(t, orderedPolicy(outbox.DeadHeadBlock), log)
	_, err := e.Sweep(ctx)
	require.NoError(t, err)

	require.Equal(t, outbox.StatusPending, h.row(t, "A").Status, "A's send failed: it retries")
	log.mu.Lock()
	var sent []string
	for _, call := range log.calls {
		for _, r := range call {
			sent = append(sent, r.Key)
		}
	}
	log.mu.Unlock()
	require.NotContains(t, sent, "B", "B (prev A) was handed to the deliverer while A was pending: sends %v", sent)
}
