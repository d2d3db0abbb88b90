package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
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
// queue has no route: before each page of the dead index after the first
// is read, every row the run has redriven so far fails again, so the
// re-fail is certain to race the scan, on a fast machine or a slow one.
func TestDeadRedriveAll_RedrivesEachDeadLetterOnce(t *testing.T) {
	t.Parallel()
	const n = 400
	e := newEnv(t)
	e.seedDead(t, n, 16<<10) // several pages of the dead index (a page stops at 1 MB)
	client := awstest.DynamoDB(t)
	refail := func(key string) error {
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		_, err := client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: aws.String(e.table), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: key}},
			ConditionExpression:      aws.String("#s = :p"),
			UpdateExpression:         aws.String("SET #s = :f, failed_at = :now, dead_queue = :q REMOVE #sh, due_at"),
			ExpressionAttributeNames: map[string]string{"#s": "status", "#sh": "shard"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":p": &ddbtypes.AttributeValueMemberS{Value: "pending"}, ":f": &ddbtypes.AttributeValueMemberS{Value: "failed"},
				":now": &ddbtypes.AttributeValueMemberN{Value: now}, ":q": &ddbtypes.AttributeValueMemberS{Value: "ghost"},
			},
		})
		return err
	}

	var (
		mu       sync.Mutex
		redriven []string // keys the run wrote to, not yet failed again
		again    = map[string]bool{}
		pages    int
		refailed int
		hookErrs []error
	)
	e.proxyAWS(t, func(op string, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasSuffix(op, ".UpdateItem"):
			var in struct{ Key map[string]map[string]string }
			if err := json.Unmarshal(body, &in); err != nil {
				hookErrs = append(hookErrs, err)
				return
			}
			// Each row fails again once: a run that took it again
			// anyway ends, and counts it twice.
			if key := in.Key["pk"]["S"]; !again[key] {
				again[key] = true
				redriven = append(redriven, key)
			}
		case strings.HasSuffix(op, ".Scan") && bytes.Contains(body, []byte(`"IndexName":"dead"`)):
			if pages++; pages == 1 {
				return
			}
			// A redrive still in flight is not pending yet: it fails
			// again before a later page.
			var later []string
			for _, key := range redriven {
				err := refail(key)
				var cc *ddbtypes.ConditionalCheckFailedException
				switch {
				case err == nil:
					refailed++
				case errors.As(err, &cc):
					later = append(later, key)
				default:
					hookErrs = append(hookErrs, err)
				}
			}
			redriven = later
		}
	})

	r := e.run(t, "dead", "redrive", "--all")
	require.Equal(t, 0, r.code, r.stderr)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, hookErrs)
	require.Greater(t, pages, 1, "the dead letters fit one page: nothing could fail again behind the cursor")
	require.Positive(t, refailed, "no redriven row failed again while the run was under way: the test proves nothing")
	m := regexp.MustCompile(`redriven (\d+), skipped (\d+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	got, _ := strconv.Atoi(m[1])
	t.Logf("%d pages; %d redriven rows failed again; %s", pages, refailed, r.stdout)
	require.Equal(t, n, got, "%d dead letters, each redriven once: %s", n, r.stdout)
}
