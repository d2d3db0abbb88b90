package consume_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

// Adversarial review 5: JoinWhereSeen with a redriven dead letter.
//
// An ordered route under skip: group g's row p (place 3) was
// dead-lettered, its place closed, and places 4-10 delivered. Then a new
// FIFO queue is subscribed to the route's FIFO topic (the case
// JoinWhereSeen exists for: "a queue newly subscribed to an ordered
// route's topic"), and the operator redrives p. The new queue's first
// message of g is p at place 3 (a late row: its successors went long
// ago), then place 11. JoinWhereSeen started g at place 3, the cursor
// said 3, and place 11 was refused as a gap (4-10) under GapWait, for
// ever: places 4-10 were delivered before the queue existed and never
// come. The promise: with JoinWhereSeen the group goes on with place 11
// (nothing before it will come), and every effect is applied at most
// once.
//
// Adopted with one correction to its premise: the review built p as a
// plain ordered message, which is what the dispatcher sent then and what
// no consumer can tell from a group's first place. The dispatcher now
// marks every copy of a redriven row (outflow.redriven), so p is decoded
// here from the message as it now arrives.
func TestAdv5_JoinWhereSeenOnARedrivenLateRowStallsTheGroupForEver(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	in, err := consume.NewInbox(awstest.DynamoDB(t), consume.InboxConfig{Table: table, Consumer: "ledger", Join: consume.JoinWhereSeen})
	require.NoError(t, err)
	ctx := context.Background()
	apply := func(m consume.Message) error { return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)) }

	// p, redriven after places 4-10 went: the new queue's first message of g.
	p, err := consume.FromQueue("https://sqs.us-east-1.amazonaws.com/123456789012/ledger.fifo", sqstypes.Message{
		MessageId: aws.String("m-p"), Body: aws.String(`{"cents":1}`),
		Attributes: map[string]string{"MessageGroupId": "g"},
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"outflow.key":      {DataType: aws.String("String"), StringValue: aws.String("p")},
			"outflow.attempt":  {DataType: aws.String("Number"), StringValue: aws.String("1")},
			"outflow.seq":      {DataType: aws.String("Number"), StringValue: aws.String("3")},
			"outflow.redriven": {DataType: aws.String("String"), StringValue: aws.String("1")},
		},
	})
	require.NoError(t, err)
	require.True(t, p.Redriven, "the redriven row's mark is decoded")
	err = apply(p)
	if err != nil {
		require.ErrorIs(t, err, consume.ErrLate)
	}
	// Place 11, the group's next row: it is all that will ever come.
	for range 10 { // each receive, until the consumer queue's redrive policy takes it away
		err = apply(ordered("k11", 11))
		if err == nil {
			break
		}
	}
	require.NoError(t, err, "place 11 waits at a gap (places 4-10) that was delivered before this queue existed and will never come")
	_, history := account(t, table, "a")
	require.Contains(t, history, "k11")
	// At most once each, and the group checks its gaps again from 11 on.
	require.Len(t, history, len(uniq(history)))
	var order *consume.OrderError
	require.ErrorAs(t, apply(ordered("k13", 13)), &order)
	require.Equal(t, int64(11), order.Cursor)
	require.False(t, order.Joining, "a row sent in its turn ended the trial join")
}

func uniq(s []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range s {
		out[v] = true
	}
	return out
}
