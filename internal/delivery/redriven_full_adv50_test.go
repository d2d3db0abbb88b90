package delivery_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	outflow "github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/outbox"
)

// Review of issue 50 (R50-2), adopted: a redriven row whose attributes
// filled SQS's 10 went without outflow.redriven, and a JoinWhereSeen
// consumer subscribed after its successors were sent started the group
// at it for good. A producer now keeps room for the mark on ordered
// routes (MaxOrderedAttributes is 6, and the size is checked with the
// mark), so the scenario runs with the most attributes a producer
// accepts: a skip route's dead letter p (place 3), redriven after places
// 4-10 went, is the new queue's first message of g, arrives marked, and
// place 11 is applied in its turn.
func TestAdv50_JoinWhereSeenOnARedrivenRowWithTheMostAttributesAProducerAcceptsDoesNotStall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// Phase 1: the producer's budget, which keeps the mark's room.
	most := map[string]string{}
	for i := range outflow.MaxOrderedAttributes {
		most["a"+strconv.Itoa(i)] = "v"
	}
	over := maps.Clone(most)
	over["one-more"] = "v"
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: awstest.NewTable(t), Ordered: []string{"r.fifo"}})
	require.NoError(t, err)
	_, err = p.TransactItems(ctx, outflow.Row{Key: "p", Queue: "r.fifo", Group: "g", Payload: []byte(`{"cents":1}`), Attributes: over})
	require.ErrorIs(t, err, outflow.ErrTooManyAttributes, "a seventh attribute would leave no room for outflow.redriven")
	_, err = p.TransactItems(ctx, outflow.Row{Key: "p", Queue: "r.fifo", Group: "g", Payload: []byte(`{"cents":1}`), Attributes: most})
	require.NoError(t, err)

	// Phase 2: p redriven, then place 11, delivered by the dispatcher.
	url := awstest.NewQueue(t, true)
	d := router(t, delivery.Clients{SQS: awstest.SQS(t)}, delivery.Routes{"r.fifo": url})
	row := outbox.Row{Key: "p", Group: "g", Seq: 3, Payload: []byte(`{"cents":1}`), Attempt: 1,
		Attributes: most, RedrivenAt: time.UnixMilli(1_700_000_000_000)}
	k11 := outbox.Row{Key: "k11", Group: "g", Seq: 11, Payload: []byte(`{"cents":1}`), Attempt: 1}
	for _, r := range []outbox.Row{row, k11} {
		for i, err := range d.Deliver(ctx, "r.fifo", []outbox.Row{r}) {
			require.NoError(t, err, i)
		}
	}
	msgs := awstest.Receive(t, url, 2, 20*time.Second)
	require.Len(t, msgs, 2)

	// Phase 3: a consumer joining where it is seen applies place 11.
	api := awstest.DynamoDB(t)
	table := awstest.UniqueName("adv50-inbox")
	require.NoError(t, consume.CreateTable(ctx, api, table))
	t.Cleanup(func() {
		_, _ = api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	in, err := consume.NewInbox(api, consume.InboxConfig{Table: table, Consumer: "ledger", Join: consume.JoinWhereSeen})
	require.NoError(t, err)
	got := map[string]consume.Message{}
	for _, m := range msgs {
		cm, err := consume.FromQueue(url, m)
		require.NoError(t, err)
		got[cm.Key] = cm
	}
	require.ElementsMatch(t, []string{"p", "k11"}, slices.Collect(maps.Keys(got)))
	require.True(t, got["p"].Redriven, "p arrived marked redriven")
	require.NoError(t, in.Apply(ctx, got["p"]), "p starts the group on trial")
	require.NoError(t, in.Apply(ctx, got["k11"]), "place 11 is applied: the trial start gives way to the first message sent in its turn")
}
