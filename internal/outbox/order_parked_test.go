package outbox_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// linkHook runs after on the first Link read of key, after the read.
type linkHook struct {
	outbox.Store
	key   string
	once  sync.Once
	after func()
}

func (s *linkHook) Link(ctx context.Context, key string) (outbox.Link, error) {
	l, err := s.Store.Link(ctx, key)
	if key == s.key {
		s.once.Do(s.after)
	}
	return l, err
}

// Review 12c: a row parked behind a pending predecessor that another
// worker delivers stays parked for the rest of the sweep, however long it
// runs.
//
// Group g: P (seq 1, pending, retrying: not due to this sweep), R (seq 2,
// prev P, due). The sweep reads P: pending, so R parks behind P "for a
// later page, shard or pass" (pending park). Right after that read, another
// worker (the wake, or a second sweeper, once P falls due) delivers P: its
// item is gone. P is never given to this run, so nothing ever releases R;
// and each later pass that gives R again skips it (isWaiting), without a
// read. A sweep that keeps draining a busy table (here, new unordered rows
// arrive during each pass) keeps R, and with it every later row of its
// group, stalled until the sweep stops; meanwhile each wake for a later
// row of the group polls R for the full HeadWait, since R is pending,
// untried, due and not blocked (mayMove), although nobody will move it.
//
// Violated: invariant 2 (a parked entry outlives its reason: the
// predecessor it waits for is settled, and the run goes on for passes).
// Expected: R delivered in a later pass of the same sweep. Suggested fix:
// a row parked behind a predecessor the run does not hold is dropped (not
// skipped) when a later pass gives it again, so it is checked again; or
// at the end of each pass, refs parked behind keys not in mine go back
// to be checked.
func TestOrdered_ARowParkedBehindAPendingPredecessorDeliveredElsewhereGoesInALaterPass(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	row := func(key string) outbox.Row {
		return outbox.Row{Key: key, Queue: "events.fifo", Group: "g", Payload: []byte(`{"k":"` + key + `"}`)}
	}
	require.NoError(t, h.store.StageOrdered(ctx, row("P"), h.clock.Now()))
	require.NoError(t, h.store.StageOrdered(ctx, row("R"), h.clock.Now()))
	// P's first attempt failed: it retries in an hour.
	p := testPolicy()
	claimed, err := h.store.Claim(ctx, "P", h.clock.Now(), p.Lease, p.MaxAttempts)
	require.NoError(t, err)
	require.NoError(t, h.store.Retry(ctx, claimed, h.clock.Now().Add(time.Hour), nil))

	// The hooks run on the engine's goroutines: they collect errors, and
	// the test asserts them.
	var hookErrs goErrs
	db := awstest.DynamoDB(t)
	hook := &linkHook{Store: h.store, key: "P", after: func() {
		// Another worker delivers P now: its item is deleted.
		_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(h.store.Table()),
			Key:       map[string]types.AttributeValue{dynamo.AttrKey: &types.AttributeValueMemberS{Value: "P"}},
		})
		hookErrs.add(err)
	}}

	// The table is busy: each send brings a new unordered row, for a few
	// more passes.
	var n atomic.Int64
	log := &sendLog{next: h.sqs, fail: func(r outbox.Row) error {
		if i := n.Add(1); i <= 6 {
			hookErrs.add(h.store.Stage(ctx, outbox.Row{Key: "u-" + strconv.FormatInt(i, 10), Queue: "orders", Payload: []byte(`{}`)}, h.clock.Now()))
		}
		return nil
	}}
	require.NoError(t, h.store.Stage(ctx, outbox.Row{Key: "u-0", Queue: "orders", Payload: []byte(`{}`)}, h.clock.Now()))
	e, err := outbox.New(hook, log, orderedPolicy(outbox.DeadHeadBlock), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	res, err := e.Sweep(ctx)
	require.NoError(t, err)
	require.NoError(t, hookErrs.err())
	require.GreaterOrEqual(t, n.Load(), int64(4), "the sweep ran several passes after P was delivered")
	require.Contains(t, log.accepted()["g"], "R", "R's predecessor P was delivered passes ago, but R stayed parked behind it for the whole sweep: %+v", res)
}
