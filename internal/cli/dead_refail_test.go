package cli_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
)

// Review 17c: redrive --all streams the dead index while it redrives. A
// dead letter that fails again while the run is under way comes back into
// the dead index with a later failed_at, after the scan's cursor, and is
// redriven again in the same run: the report counts more redrives than
// there were dead letters (819 of 400 here), and a row that keeps failing
// at once can keep the run going as long as it fails faster than a page
// is read. The read-then-act redrive it replaced redrove each once. The
// "dispatcher" here re-fails a redriven row as the sweep does a row whose
// queue has no route.
func TestDeadRedriveAll_RedrivesEachDeadLetterOnce(t *testing.T) {
	t.Parallel()
	tests := []struct{ name string }{{"redrive --all"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			const n = 400
			e.seedDead(t, n, 16<<10)
			client := awstest.DynamoDB(t)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var refailed atomic.Int64
			var tries atomic.Int64
			for w := range 4 {
				wg.Go(func() {
					for ctx.Err() == nil {
						for i := w; i < n; i += 4 {
							now := strconv.FormatInt(time.Now().UnixMilli(), 10)
							_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
								TableName: aws.String(e.table), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "dead-" + pad5(i)}},
								ConditionExpression:      aws.String("#s = :p"),
								UpdateExpression:         aws.String("SET #s = :f, failed_at = :now, dead_queue = :q REMOVE #sh, due_at"),
								ExpressionAttributeNames: map[string]string{"#s": "status", "#sh": "shard"},
								ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
									":p": &ddbtypes.AttributeValueMemberS{Value: "pending"}, ":f": &ddbtypes.AttributeValueMemberS{Value: "failed"},
									":now": &ddbtypes.AttributeValueMemberN{Value: now}, ":q": &ddbtypes.AttributeValueMemberS{Value: "ghost"},
								},
							})
							if err == nil {
								refailed.Add(1)
							} else if ctx.Err() == nil && !strings.Contains(err.Error(), "ConditionalCheckFailed") {
								t.Log(err)
							}
							tries.Add(1)
						}
					}
				})
			}
			r := e.run(t, "dead", "redrive", "--all")
			cancel()
			wg.Wait()
			require.Equal(t, 0, r.code, r.stderr)
			m := regexp.MustCompile(`redriven (\d+), skipped (\d+)`).FindStringSubmatch(r.stdout)
			require.NotNil(t, m, r.stdout)
			got, _ := strconv.Atoi(m[1])
			t.Logf("refailed %d of %d tries; %s", refailed.Load(), tries.Load(), r.stdout)
			require.LessOrEqual(t, got, n, "%d dead letters, each redriven once: %s", n, r.stdout)
		})
	}
}
