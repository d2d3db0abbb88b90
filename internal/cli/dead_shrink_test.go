package cli_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
)

// Review 17c: --queue pages a Query of the dead index, newest first, while
// the redrive or purge removes entries from it: every one is reached.
func TestDeadBulkQueue_ReachesEveryOneOnAShrinkingIndex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		out  string
	}{
		{"redrive --queue", []string{"dead", "redrive", "--queue", "ghost"}, "redriven 150, skipped 0"},
		{"purge --queue", []string{"dead", "purge", "--queue", "ghost", "--yes"}, "purged 150, skipped 0"},
		{"purge --queue --older-than", []string{"dead", "purge", "--queue", "ghost", "--older-than", "1ns", "--yes"}, "purged 150 of those failed more than 1ns ago, skipped 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedDead(t, 150, 16<<10)
			r := e.run(t, tt.args...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, tt.out)
			out, err := awstest.DynamoDB(t).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(e.table), IndexName: aws.String("dead"), Select: ddbtypes.SelectCount})
			require.NoError(t, err)
			require.Zero(t, out.Count, "dead letters left")
		})
	}
}
