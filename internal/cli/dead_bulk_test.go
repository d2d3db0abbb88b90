package cli_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// seedOddDead writes n dead letters of queue "ghost" whose attempt is a
// fraction, as the engine leaves a row it dead-letters for a fractional
// attempt (the claim adds 1 to it, the fail keeps it): they are in the
// dead index like any other.
func (e *env) seedOddDead(t *testing.T, n int) []string {
	t.Helper()
	var reqs []ddbtypes.WriteRequest
	var keys []string
	for i := range n {
		key := fmt.Sprintf("odd-%03d", i)
		av, err := dynamo.Encode(outbox.Row{
			Key: key, Queue: "ghost", Payload: []byte("x"), Status: outbox.StatusFailed,
			Attempt: 1, CreatedAt: time.Now(), FailedAt: time.Now().Add(-time.Duration(i) * time.Second), LastError: "malformed attempt",
		}, 4)
		require.NoError(t, err)
		av["attempt"] = &ddbtypes.AttributeValueMemberN{Value: "2.5"}
		keys = append(keys, key)
		reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: av}})
	}
	for chunk := range slices.Chunk(reqs, 25) {
		out, err := awstest.DynamoDB(t).BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{e.table: chunk}})
		require.NoError(t, err)
		require.Empty(t, out.UnprocessedItems)
	}
	return keys
}

// Review 17c: redrive and purge of --all or --queue take each key from
// EachDead, which decodes a dead-index entry with one UnmarshalMap whose
// error it ignores: a non-integer attempt stops the decoding part way, in
// map order, and the key is often left empty. Such a dead letter is then
// never reached (the command acts on "" instead and fails), though it is
// failed and in the index.
func TestDeadBulk_ReachesDeadLettersWithAFractionalAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want outbox.Status // of every row after
		out  string
	}{
		{"redrive --all", []string{"dead", "redrive", "--all"}, outbox.StatusPending, "redriven 20, skipped 0"},
		{"redrive --queue", []string{"dead", "redrive", "--queue", "ghost"}, outbox.StatusPending, "redriven 20, skipped 0"},
		{"purge --all", []string{"dead", "purge", "--all", "--yes"}, "", "purged 20, skipped 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			keys := e.seedOddDead(t, 20)
			r := e.run(t, tt.args...)
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stdout, tt.out)
			for _, k := range keys {
				require.Equal(t, tt.want, e.status(t, k), k)
			}
		})
	}
}
