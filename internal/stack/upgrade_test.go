package stack_test

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
	"github.com/outflowhq/outflow/internal/stack"
)

// templateBeforeOrderedGroups is template.yaml as it was before ordered
// groups (at 6d7bc38, the parent of 11a5949, which added them; 9a85f09
// then added prev and seq to the due index's projection). Its due index
// projects created_at and queue only: stacks deployed from it, or from any
// template before 9a85f09, are what DueIndexProjection=created_at,queue is
// for.
const templateBeforeOrderedGroups = "testdata/template-before-ordered-groups.yaml"

// keepOldIndex is the parameter an update of such a stack passes.
var keepOldIndex = map[string]string{"DueIndexProjection": "created_at,queue"}

// translate is the SAM translation of the template at path.
func translate(t *testing.T, path string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := stack.Translate(ctx, path)
	require.NoError(t, err)
	return raw
}

// dueIndex is the due index of the template's table.
func dueIndex(t *testing.T, tpl *stack.Template) types.GlobalSecondaryIndex {
	t.Helper()
	tb, err := tpl.Table("OutboxTable")
	require.NoError(t, err)
	for _, ix := range tb.GlobalSecondaryIndexes {
		if aws.ToString(ix.IndexName) == dynamo.DueIndex {
			return ix
		}
	}
	require.FailNow(t, "the template's table has no due index")
	return types.GlobalSecondaryIndex{}
}

// TestTemplate_DueIndexProjectionKeepsTheIndexesOfAStackFromBeforeOrderedGroups
// is the authority on the upgrade: CloudFormation refuses an update that
// changes an existing global secondary index's key schema or projection,
// so with created_at,queue every index of today's template is exactly the
// old template's, and the key attributes, key schema and stream too. With
// the default the due index projects prev and seq as well, the only
// difference, and the Go schema follows each value.
func TestTemplate_DueIndexProjectionKeepsTheIndexesOfAStackFromBeforeOrderedGroups(t *testing.T) {
	t.Parallel()
	old, err := stack.Load(templateBeforeOrderedGroups, nil)
	require.NoError(t, err)
	was, err := old.Table("OutboxTable")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{dynamo.AttrCreatedAt, dynamo.AttrQueue}, dueIndex(t, old).Projection.NonKeyAttributes, "the old template's due index")

	tests := []struct {
		name       string
		overrides  map[string]string
		schema     dynamo.Schema
		sameAsOld  bool
		projection []string
	}{
		{"kept", keepOldIndex, dynamo.Table.WithoutLinks(), true, []string{dynamo.AttrCreatedAt, dynamo.AttrQueue}},
		{"default", nil, dynamo.Table, false, []string{dynamo.AttrCreatedAt, dynamo.AttrQueue, dynamo.AttrPrev, dynamo.AttrSeq}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb, err := load(t, tt.overrides).Table("OutboxTable")
			require.NoError(t, err)
			require.Equal(t, tt.projection, dueIndex(t, load(t, tt.overrides)).Projection.NonKeyAttributes)
			require.ElementsMatch(t, was.AttributeDefinitions, tb.AttributeDefinitions)
			require.Equal(t, was.KeySchema, tb.KeySchema)
			require.Equal(t, was.StreamSpecification, tb.StreamSpecification)
			if tt.sameAsOld {
				require.ElementsMatch(t, was.GlobalSecondaryIndexes, tb.GlobalSecondaryIndexes, "every index as the old stack has it")
			} else {
				require.NotEqual(t, dueIndex(t, old).Projection, dueIndex(t, load(t, tt.overrides)).Projection)
			}
			want := tt.schema.CreateTableInput("outbox")
			require.ElementsMatch(t, want.GlobalSecondaryIndexes, tb.CreateTableInput("outbox").GlobalSecondaryIndexes, "the Go schema follows DueIndexProjection")
		})
	}
}

// TestUpgrade_AStackFromBeforeOrderedGroupsUpdatesOnlyKeepingItsDueIndex
// creates a stack from the template before ordered groups on the moto
// server and updates it to today's. moto's CloudFormation cannot update a
// table at all on its own; internal/moto/cloudformation.py updates it in
// place as CloudFormation does and refuses, as CloudFormation does, a
// change to an existing index's projection. So the refusal checked here
// is that teaching's (the template test above is the authority); what the
// moto update shows is that, with the old projection kept, the whole
// update goes through: the table stays, keeps its rows and its index, and
// takes the new settings, and every resource the new template adds is
// created.
func TestUpgrade_AStackFromBeforeOrderedGroupsUpdatesOnlyKeepingItsDueIndex(t *testing.T) {
	t.Parallel()
	old := translate(t, templateBeforeOrderedGroups)
	tests := []struct {
		name       string
		parameters map[string]string
		refused    string
	}{
		{"kept", keepOldIndex, ""},
		{"default", nil, "Cannot update GSI's properties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := deployTranslation(t, old, nil)
			table := d.ids["OutboxTable"]
			ddb := awstest.DynamoDB(t)
			store, err := dynamo.New(ddb, dynamo.Config{Table: table, Shards: 4})
			require.NoError(t, err)
			require.NoError(t, store.StageOrdered(ctx, outbox.Row{Key: "before-upgrade", Queue: "events.fifo", Group: "g", Payload: []byte(`{}`)}, time.Now()))

			// The old stack has the example targets and routes to them:
			// updating it keeps them only with ExampleTargets "true"
			// (docs/deploy.md says so).
			err = d.update(t, translatedRaw(t), withExamples(tt.parameters))
			if tt.refused != "" {
				require.ErrorContains(t, err, tt.refused)
				require.ElementsMatch(t, []string{dynamo.AttrCreatedAt, dynamo.AttrQueue}, deployedDueIndex(t, ddb, table).Projection.NonKeyAttributes, "the refused update left the index alone")
				return
			}
			require.NoError(t, err)
			require.Equal(t, table, d.ids["OutboxTable"], "updated in place, not replaced")
			t.Run("table", d.checkTable)
			row, err := store.Get(ctx, "before-upgrade")
			require.NoError(t, err)
			require.NotNil(t, row, "the row staged before the update is still there")
			for _, added := range []string{"NoticesTopic", "DomainBus", "BlockedGroupAlarm", "StrayRowsAlarm"} {
				require.NotEmpty(t, d.ids[added], "%s, which the old template did not have, is created", added)
			}
		})
	}
}

// deployedDueIndex is the due index of the deployed table.
func deployedDueIndex(t *testing.T, ddb *dynamodb.Client, table string) types.GlobalSecondaryIndexDescription {
	t.Helper()
	out, err := ddb.DescribeTable(context.Background(), describeTable(table))
	require.NoError(t, err)
	for _, ix := range out.Table.GlobalSecondaryIndexes {
		if aws.ToString(ix.IndexName) == dynamo.DueIndex {
			return ix
		}
	}
	require.FailNow(t, "the deployed table has no due index")
	return types.GlobalSecondaryIndexDescription{}
}
