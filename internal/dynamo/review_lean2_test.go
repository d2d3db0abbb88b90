package dynamo_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
)

// TestReviewLean2_OneItemTheBackstopCannotIndexStopsItForEver: the
// backstop "never moves its place past a row whose write failed", which
// is right for a passing failure, but a write DynamoDB refuses for good
// (here: the item is at the 400 KB limit, so even the shard does not fit;
// written by hand, or by a producer in another language that does not
// leave Growth's room) fails the same way on every run (20 runs here,
// 80 pages' budget, over a table of 12 items). The place never
// moves past it again, so every lean row after it in scan order, on the
// whole table, is never found: the stream's misses there wait for ever.
// The claim path has the cure (failTooLarge / failRefused dead-letter such
// an item with its reason); the backstop's index has none.
func TestReviewLean2_OneItemTheBackstopCannotIndexStopsItForEver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := newBackstop(t)
	api := awstest.DynamoDB(t)
	at := &types.AttributeValueMemberN{Value: strconv.FormatInt(t0.UnixMilli(), 10)}
	// The largest pending item with no shard the table takes: the shard
	// (6 bytes) no longer fits.
	put := func(n int) error {
		_, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(b.Table()), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "at-the-limit"}, "queue": &types.AttributeValueMemberS{Value: "orders"},
			"payload": &types.AttributeValueMemberS{Value: strings.Repeat("x", n)}, "status": &types.AttributeValueMemberS{Value: "pending"},
			"attempt": &types.AttributeValueMemberN{Value: "0"}, "created_at": at, "due_at": at,
		}})
		return err
	}
	lo, hi := 380_000, 410*1024 // put(lo) succeeds, put(hi) fails
	require.NoError(t, put(lo))
	require.Error(t, put(hi))
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; put(mid) == nil {
			lo = mid
		} else {
			hi = mid
		}
	}
	require.NoError(t, put(lo))
	for i := range 10 {
		stageLean(t, s, fmt.Sprintf("missed-%02d", i), t0)
	}
	// Pages of 2 items (a large table in small): the rows after the first
	// page past the bad item are in later pages.
	b.Pages, b.PageSize = 4, 2
	var found []string
	for i := range 20 {
		res, _ := b.Run(ctx, t0.Add(time.Duration(i+1)*time.Minute))
		found = append(found, res.Keys...)
	}
	require.Len(t, found, 10, "every lean row the stream missed is found, whatever one bad item does (found %v)", found)
}
