package operate_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// deadAt stages a row on queue and dead-letters it at failed.
func deadAt(t *testing.T, op *dynamo.Operator, key, queue string, failed time.Time) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, op.Stage(ctx, outbox.Row{Key: key, Queue: queue, Payload: []byte("{}")}, failed.Add(-time.Second)))
	row, err := op.Claim(ctx, key, failed, time.Minute, 5)
	require.NoError(t, err)
	require.NoError(t, op.DeadLetter(ctx, row, failed, []outbox.AttemptError{{At: failed, Attempt: 1, Message: "boom"}}))
}

func TestListPage_PagesThroughEveryDeadLetterOnceEvenWhenManyShareAMillisecond(t *testing.T) {
	t.Parallel()
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: awstest.NewTable(t), Shards: 4})
	require.NoError(t, err)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	want := map[string]bool{}
	// 3 alone, then 5 in one millisecond, then 2 more: pages of 2 end
	// inside the crowded millisecond.
	for i, ms := range []int{0, 1, 2, 3, 3, 3, 3, 3, 4, 5} {
		key := fmt.Sprintf("k-%d", i)
		deadAt(t, op, key, "q", base.Add(time.Duration(ms)*time.Millisecond))
		want[key] = true
	}
	for _, queue := range []string{"q", ""} { // a query of the route, a scan of the index
		t.Run("queue "+queue, func(t *testing.T) {
			seen := map[string]int{}
			var last time.Time
			q := dynamo.DeadQuery{Queue: queue}
			for pages := 0; ; pages++ {
				require.Less(t, pages, 10, "the pages end")
				p, err := operate.ListPage(context.Background(), op, q, 2, nil, nil)
				require.NoError(t, err)
				for _, d := range p.Dead {
					seen[d.Key]++
					if !last.IsZero() {
						require.False(t, d.FailedAt.After(last), "newest first, across pages")
					}
					last = d.FailedAt
				}
				if p.Next.IsZero() {
					break
				}
				q.Before = p.Next
			}
			require.Len(t, seen, len(want))
			for k, n := range seen {
				require.Equal(t, 1, n, "%s shown once", k)
			}
		})
	}

	// A filter that keeps few reads on until the page fills or the index ends.
	p, err := operate.ListPage(context.Background(), op, dynamo.DeadQuery{Queue: "q"}, 2, nil,
		func(d operate.DeadLetter) bool { return d.Key == "k-0" || d.Key == "k-1" })
	require.NoError(t, err)
	require.Len(t, p.Dead, 2)
	require.Equal(t, []string{"k-1", "k-0"}, []string{p.Dead[0].Key, p.Dead[1].Key})
}
