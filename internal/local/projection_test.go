package local_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/local"
)

// TestDemo_DueIndexProjectionShapesTheLocalTableAndOrderHoldsEitherWay
// provisions the table with each DueIndexProjection value: the local due
// index projects what the template says (the index of a stack deployed
// before ordered groups with created_at,queue), and the demo's ordered
// groups arrive in staging order on both.
func TestDemo_DueIndexProjectionShapesTheLocalTableAndOrderHoldsEitherWay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		projection string
		want       []string
	}{
		{"created_at,queue,prev,seq", []string{dynamo.AttrCreatedAt, dynamo.AttrQueue, dynamo.AttrPrev, dynamo.AttrSeq}},
		{"created_at,queue", []string{dynamo.AttrCreatedAt, dynamo.AttrQueue}},
	}
	for _, tt := range tests {
		t.Run(tt.projection, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			opts, demo := local.NewDemo(local.Options{Template: template, Params: map[string]string{"DueIndexProjection": tt.projection}})
			r, err := local.Start(ctx, opts)
			require.NoError(t, err)
			defer r.Close()

			out, err := dynamodb.NewFromConfig(r.AWS).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.Stack.Table)})
			require.NoError(t, err)
			var due []string
			for _, ix := range out.Table.GlobalSecondaryIndexes {
				if aws.ToString(ix.IndexName) == dynamo.DueIndex {
					due = ix.Projection.NonKeyAttributes
				}
			}
			require.ElementsMatch(t, tt.want, due)

			rep := runDemo(t, r, demo)
			require.True(t, rep.OK(), "problems: %v", rep.Problems)
			require.Equal(t, 3, rep.OrderedGroups, "ordered groups checked against staging order")
			require.Equal(t, 48, rep.Delivered)
			require.Equal(t, 2, rep.DeadLettered)
		})
	}
}
