package operate_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Review of issue 50 (R50-3): a dead letter whose send ended with its
// outcome unknown (a timeout after SQS stored the message, a lapsed final
// claim: the dispatcher records unsure_at and an unsure attempt) may have
// been delivered; the consumer may have applied it. Every view still
// tells the operator "its own message was not delivered": OutcomeOf reads
// status, closed, attempts and redriven_at, never unsure_at. Issue 50
// item 4 asks each view to say how the row really ended ("An operator
// asking 'did order X's event go out?'"); here the answer is a firm no
// where the truth is "perhaps". The same holds for dead-letter-closed (a
// skip dead letter whose own unsure copy may have landed before its
// closing message) and for dead list, stats --exact and the console,
// which call OutcomeOf with the same fields.
func TestAdv50_ADeadLetterWhoseSendEndedUnsureIsNotSaidToBeUndelivered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: awstest.NewTable(t), Shards: 4})
	require.NoError(t, err)
	failed := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	require.NoError(t, op.Stage(ctx, outbox.Row{Key: "order-1", Queue: "orders", Payload: []byte("{}")}, failed.Add(-time.Second)))
	row, err := op.Claim(ctx, "order-1", failed, time.Minute, 1)
	require.NoError(t, err)
	// Its one attempt timed out: SQS may have stored it (run.go's
	// unsureAfter and failure, as settle writes them).
	row.UnsureAt = failed
	require.NoError(t, op.DeadLetter(ctx, row, failed, []outbox.AttemptError{{At: failed, Attempt: 1, Unsure: true,
		Message: "send batch: operation error SQS: SendMessageBatch, https response error: context deadline exceeded"}}))

	shown, err := operate.Show(ctx, op, "order-1", false, nil)
	require.NoError(t, err)
	require.True(t, shown.Errors[0].Unsure, "its history says the send may have landed")
	require.NotContains(t, shown.OutcomeDetail, "was not delivered",
		"outcome %s: a send whose outcome is unknown may have been delivered", shown.Outcome)

	// The list reads the dead index, which has no unsure_at: it says it
	// cannot tell, never a firm "not delivered".
	listed, err := operate.ListDead(ctx, op, dynamo.DeadQuery{}, 10, nil)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, operate.OutcomeDeadLetter, listed[0].Outcome)
	require.Contains(t, listed[0].OutcomeDetail, "unless a send of it ended with its outcome unknown (dead show says)")
}
