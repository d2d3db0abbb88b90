package outbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/sdkhttp"
)

// A done whose answer is lost has applied; the SDK sends it again, and
// the retry is refused: the row is gone (or kept as done). Taken for a
// settle that did not apply, it released the rows parked behind the
// delivered row. A sweep finds them again in its next pass; the wake has
// none, and left them for the sweep: a minute or more for a group that
// should leave in about a second. While the claim is live, such a refusal
// can only be the run's own done, so the group goes on in the same run,
// in order (the sweep cases guard that a sweep still does).
func TestOrdered_ADoneWhoseAnswerWasLostLetsTheGroupGoOnInTheSameRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		retention bool // done rows kept as done, not deleted
		op        string
		wake      bool // the wake's invocation, given the group's refs, not a sweep
	}{
		{"sweep, deleted", false, "DeleteItem", false},
		{"sweep, kept as done", true, "UpdateItem", false},
		{"wake, deleted", false, "DeleteItem", true},
		{"wake, kept as done", true, "UpdateItem", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarnessShards(t, 1)
			keys := h.stageGroups(t, "events.fifo", []string{"g"}, 3)["g"]
			cfg := awstest.TestConfig(t)
			// The first UpdateItem is the head's claim; with retention,
			// the second is its done.
			nth := 1
			if tc.retention {
				nth = 2
			}
			transport := awstest.LoseAnswer(tc.op, nth)
			cfg.HTTPClient = sdkhttp.Client(&http.Client{Transport: transport})
			dcfg := dynamo.Config{Table: h.store.Table(), Shards: 1}
			if tc.retention {
				dcfg.DoneRetention = 24 * time.Hour
			}
			store, err := dynamo.New(dynamodb.NewFromConfig(cfg), dcfg)
			require.NoError(t, err)
			log := &sendLog{next: h.sqs}
			p := orderedPolicy(outbox.DeadHeadBlock)
			p.Concurrency = 1
			e, err := outbox.New(store, log, p, outbox.WithClock(h.clock.Now))
			require.NoError(t, err)

			var res outbox.Result
			if tc.wake {
				res, err = e.DeliverRefs(ctx, []outbox.DueRef{
					{Key: keys[0], Queue: "events.fifo", Seq: 1, Linked: true},
					{Key: keys[1], Queue: "events.fifo", Prev: keys[0], Seq: 2, Linked: true},
					{Key: keys[2], Queue: "events.fifo", Prev: keys[1], Seq: 3, Linked: true},
				})
			} else {
				res, err = e.Sweep(ctx)
			}
			require.NoError(t, err)
			require.True(t, transport.Lost(), "the head's done answer was lost, and the SDK sent it again")
			require.Equal(t, keys, log.accepted()["g"], "the whole group in one sweep, in order: %+v", res)
			require.Zero(t, res.Waiting, "%+v", res)
		})
	}
}
