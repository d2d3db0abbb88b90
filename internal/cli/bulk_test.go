package cli_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/apilog"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// seedDead writes n dead letters of queue "ghost" with payloads of
// payload bytes, as the store encodes them, 25 a request.
func (e *env) seedDead(t *testing.T, n, payload int) {
	t.Helper()
	// Failed an hour ago, a millisecond apart: before any run a test
	// starts, which takes only rows dead before it began, with no wait.
	base := time.Now().Add(-time.Hour)
	var reqs []ddbtypes.WriteRequest
	for i := range n {
		av, err := dynamo.Encode(outbox.Row{
			Key: fmt.Sprintf("dead-%05d", i), Queue: "ghost", Payload: []byte(strings.Repeat("x", payload)), Status: outbox.StatusFailed,
			Attempt: 1, CreatedAt: base, FailedAt: base.Add(time.Duration(i) * time.Millisecond), LastError: "boom",
		}, 4)
		require.NoError(t, err)
		reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: av}})
	}
	for chunk := range slices.Chunk(reqs, 25) {
		out, err := awstest.DynamoDB(t).BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{e.table: chunk}})
		require.NoError(t, err)
		require.Empty(t, out.UnprocessedItems)
	}
}

// Redrive and purge of --all act on each page of the dead index as it is
// read, not on a list of every dead letter read first: their memory does
// not grow with the dead letters. 150 rows of 16 KB are several pages of
// the dead index (DynamoDB, and moto, stop a page at 1 MB): a write comes
// before the last page is read.
func TestDeadBulk_ActsOnEachPageAsTheDeadIndexIsRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		write string
		out   string
	}{
		{"redrive", []string{"dead", "redrive", "--all"}, "DynamoDB.UpdateItem", "redriven 150, skipped 0"},
		{"purge", []string{"dead", "purge", "--all", "--yes"}, "DynamoDB.DeleteItem", "purged 150, skipped 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedDead(t, 150, 16<<10)
			proxy, err := apilog.Start(awstest.Endpoint())
			require.NoError(t, err)
			t.Cleanup(func() { _ = proxy.Close() })
			e.vars["AWS_ENDPOINT_URL"] = proxy.URL

			r := e.run(t, tt.args...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, tt.out)
			require.Contains(t, r.stderr, "150/150")

			var scans []int // where each page of the dead index was read
			ops := proxy.Ops()
			for i, op := range ops {
				if op == "DynamoDB.Scan" {
					scans = append(scans, i)
				}
			}
			require.Greater(t, len(scans), 2, "the dead index is several pages")
			require.Less(t, slices.Index(ops, tt.write), scans[1], "a write before the second page is read")
			require.Equal(t, 150, proxy.Counts()[tt.write])
		})
	}
}
