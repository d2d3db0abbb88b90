package outbox_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// newHarnessWithoutLinks is newHarness on a table whose due index projects
// only created_at and queue: the index of a stack deployed before ordered
// groups, which template.yaml's DueIndexProjection keeps (CloudFormation
// cannot change an index's projection in place).
func newHarnessWithoutLinks(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	client := awstest.DynamoDB(t)
	schema := dynamo.Table.WithoutLinks()
	name := awstest.UniqueName("outflow-test-nolinks")
	require.NoError(t, dynamo.Create(ctx, client, schema.CreateTableInput(name), schema.TTLAttribute))
	t.Cleanup(func() { _ = dynamo.DeleteTable(ctx, client, name) })

	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	for _, ix := range desc.Table.GlobalSecondaryIndexes {
		if aws.ToString(ix.IndexName) == dynamo.DueIndex {
			require.ElementsMatch(t, []string{dynamo.AttrCreatedAt, dynamo.AttrQueue}, ix.Projection.NonKeyAttributes, "the due index carries no link")
		}
	}

	store, err := dynamo.New(client, dynamo.Config{Table: name, Shards: 4})
	require.NoError(t, err)
	routes := delivery.Routes{
		"orders":      awstest.NewQueue(t, false),
		"emails":      awstest.NewQueue(t, false),
		"events.fifo": awstest.NewQueue(t, true),
	}
	return &harness{store: store, sqs: sqsRouter(t, awstest.SQS(t), routes), routes: routes, clock: newClock()}
}

// TestOrdered_DueIndexWithoutLinksStillDeliversEveryGroupInStagingOrder
// checks that the engine needs no prev or seq in the due index: an entry
// without them looks like a row with no predecessor, the claim returns the
// whole row with its link, and the predecessor is then read with a
// strongly consistent read; a row that must wait is released unsent, so
// order holds at the price of a claim, on a listed route as on one the
// dispatcher was not told is ordered.
func TestOrdered_DueIndexWithoutLinksStillDeliversEveryGroupInStagingOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy outbox.Policy
	}{
		{"listed route", orderedPolicy(outbox.DeadHeadBlock)},
		{"unlisted route", testPolicy()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessWithoutLinks(t)
			want := h.stageGroups(t, "events.fifo", []string{"a", "b", "c"}, 6)
			h.stage(t, rowsFor("orders", 5, "")...)
			log := &sendLog{next: h.sqs}
			e := h.engine(t, tt.policy, log)
			var res outbox.Result
			for range 30 { // a row released to wait goes in a later sweep
				r, err := e.Sweep(context.Background())
				require.NoError(t, err)
				res.Delivered += r.Delivered
				res.DeadLettered += r.DeadLettered
				if r.Delivered == 0 {
					break
				}
			}
			require.Equal(t, 23, res.Delivered)
			require.Zero(t, res.DeadLettered, "a claim released to wait costs no attempt")
			got := log.accepted()
			for g, keys := range want {
				require.Equal(t, keys, got[g], "group %s in staging order", g)
			}
			log.oneInFlight(t)
			require.Len(t, log.order, 23, "each row sent once")
		})
	}
}
