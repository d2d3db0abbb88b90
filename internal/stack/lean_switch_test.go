package stack_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// TestUpgrade_SwitchingLeanOnAndOffUpdatesInPlaceAndKeepsEveryRow updates
// a stack deployed on the moto server to LeanStaging=true and back, as
// the upgrade test does: each update goes through in place (the table is
// not replaced), the stack takes the new parameter, and the rows
// staged before, a lean one (no shard) and an indexed one, are still
// there as they were, for the wake, the sweep and the backstop to deliver.
func TestUpgrade_SwitchingLeanOnAndOffUpdatesInPlaceAndKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := deployWith(t, deployParameters)
	table := d.ids["OutboxTable"]
	store, err := dynamo.New(awstest.DynamoDB(t), dynamo.Config{Table: table, Shards: 4})
	require.NoError(t, err)
	now := time.Now()
	require.NoError(t, store.Stage(ctx, outbox.Row{Key: "indexed", Queue: "orders", Payload: []byte("i")}, now))
	require.NoError(t, store.Stage(ctx, outbox.Row{Key: "lean", Queue: "orders", Payload: []byte("l"), Unindexed: true}, now))

	for _, lean := range []string{"true", "false", "true"} {
		t.Run("LeanStaging="+lean, func(t *testing.T) {
			params := maps.Clone(deployParameters)
			params["LeanStaging"] = lean
			require.NoError(t, d.update(t, translatedRaw(t), params))
			require.Equal(t, table, d.ids["OutboxTable"], "updated in place, not replaced")
			// moto's CloudFormation leaves a resource whose definition is
			// unchanged as it is, so a change of parameters alone does not
			// reach the functions' environment here: the stack's parameter
			// is what this reads, and TestTemplate_LeanStagingAndTheBackstopReachBothFunctions
			// that it sets OUTFLOW_LEAN on both functions.
			out, err := cloudformation.NewFromConfig(d.cfg).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(d.name)})
			require.NoError(t, err)
			var got string
			for _, p := range out.Stacks[0].Parameters {
				if aws.ToString(p.ParameterKey) == "LeanStaging" {
					got = aws.ToString(p.ParameterValue)
				}
			}
			require.Equal(t, lean, got)
			row, err := store.Get(ctx, "lean")
			require.NoError(t, err)
			require.NotNil(t, row)
			require.True(t, row.Unindexed && row.Status == outbox.StatusPending, "the lean row is as staged: %+v", row)
			require.Equal(t, []string{"indexed"}, awstest.DueKeys(t, store, now.Add(time.Hour)), "the indexed row is still in the due index")
		})
	}
}
