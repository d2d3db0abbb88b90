package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// A purged dead letter no longer holds its group: the next sweep reads it
// gone and sends its successor. A head whose last send ended unsure (a
// timeout: SQS may store the request after the client gave up) may still
// land until UnsureWait after its unsure_at; purged within that window,
// that copy would land behind its successor. An adversarial review
// (session 6) broke the sweep this way; the purge now holds such a row.
func TestOrdered_APurgeHoldsAnUnsureDeadHeadUntilNoCopyOfItCanLand(t *testing.T) {
	t.Parallel()
	for _, dh := range []outbox.DeadHead{outbox.DeadHeadSkip, outbox.DeadHeadBlock} {
		t.Run(string(dh), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarnessShards(t, 1)
			keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
			p := orderedPolicy(dh)
			p.MaxAttempts = 1
			op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
			require.NoError(t, err)

			// The head's only attempt timed out on the client and was
			// dead-lettered, unsure.
			head, err := h.store.Claim(ctx, keys[0], h.clock.Now(), p.Lease, p.MaxAttempts)
			require.NoError(t, err)
			unsureAt := h.clock.Now()
			head.UnsureAt = unsureAt
			hist := []outbox.AttemptError{{At: unsureAt, Attempt: head.Attempt, Message: "send: timeout", Unsure: true}}
			if dh == outbox.DeadHeadSkip {
				// Under skip its place was closed first, as skip does;
				// a dead letter never closed would be closed by the
				// sweep (TestPolicySwitch_...).
				head.Closed = outbox.ClosedDeadLetter
			}
			require.NoError(t, h.store.DeadLetter(ctx, head, unsureAt, hist))
			log := &sendLog{next: h.sqs}
			sweep := func() {
				t.Helper()
				_, err := h.engine(t, p, log).Sweep(ctx)
				require.NoError(t, err)
			}

			// Within the window the purge holds the head, and the group
			// waits.
			h.clock.Advance(p.UnsureWait() - time.Second)
			purge := func() operate.Result {
				t.Helper()
				return purgeAt(t, op, keys[:1], operate.Selection{}, h.clock.Now(), p.UnsureWait())
			}
			require.Equal(t, operate.Result{Action: "purge", Held: 1, HeldUntil: ceilSecond(unsureAt.Add(p.UnsureWait()))}, purge())
			require.Equal(t, outbox.StatusFailed, h.row(t, keys[0]).Status, "the held head is still a dead letter")
			sweep()
			require.Empty(t, log.accepted()["g"], "the successor went while a copy of its head may still land")

			// Past it, the purge goes: the head's place is closed by a
			// message sent in it, then the group goes on.
			h.clock.Advance(time.Second)
			require.Equal(t, operate.Result{Action: "purge", Done: 1}, purge())
			if dh == outbox.DeadHeadSkip {
				h.gone(t, keys[0]) // its place was closed already: deleted
				sweep()
				require.Equal(t, keys[1:], log.accepted()["g"], "its successor, once no copy of the head can land")
				return
			}
			require.Equal(t, outbox.ClosedPurged, h.row(t, keys[0]).Closed, "the purged head waits to close its place")
			sweep()
			require.Equal(t, keys, log.accepted()["g"], "the closing message in the head's place, then its successor")
			h.gone(t, keys[0])
		})
	}
}

// A purge holds a dead letter only for an unsure send: one whose sends all
// failed for certain (refused, too large), or that failed again after the
// operator chose it, is purged or skipped as before.
func TestPurge_HoldsOnlyWhatAnUnsureSendMayStillReach(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	p := testPolicy()
	p.MaxAttempts = 1
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)
	dead := func(key string, unsure bool) time.Time {
		t.Helper()
		return stageDead(t, h, p, outbox.Row{Key: key, Queue: "q", Payload: []byte(`{}`)}, unsure)
	}
	dead("definite", false)
	dead("old-unsure", true)
	h.clock.Advance(p.UnsureWait())
	chosen := h.clock.Now()
	at := dead("fresh-unsure", true)
	h.clock.Advance(time.Second)
	dead("failed-after", true) // failed after the operator chose: skipped, not held

	res := purgeAt(t, op, []string{"definite", "old-unsure", "fresh-unsure", "failed-after", "missing"}, operate.Selection{}, chosen.Add(time.Millisecond), p.UnsureWait())
	require.Equal(t, operate.Result{Action: "purge", Done: 2, Skipped: 2, Held: 1, HeldUntil: ceilSecond(at.Add(p.UnsureWait()))}, res)
	h.gone(t, "definite")
	h.gone(t, "old-unsure")
	require.Equal(t, outbox.StatusFailed, h.row(t, "fresh-unsure").Status)
}

// stageDead stages row and makes it a dead letter at the harness clock's
// now, which it returns: its one send ended unsure (a timeout), or failed
// for certain.
func stageDead(t *testing.T, h *harness, p outbox.Policy, row outbox.Row, unsure bool) time.Time {
	t.Helper()
	ctx := context.Background()
	h.stage(t, row)
	claimed, err := h.store.Claim(ctx, row.Key, h.clock.Now(), p.Lease, p.MaxAttempts)
	require.NoError(t, err)
	now := h.clock.Now()
	msg := "send: refused"
	if unsure {
		claimed.UnsureAt, msg = now, "send: timeout"
	}
	require.NoError(t, h.store.DeadLetter(ctx, claimed, now, []outbox.AttemptError{{At: now, Attempt: 1, Message: msg, Unsure: unsure}}))
	return now
}

// purgeAt purges keys (or sel's dead letters) chosen at now and holding
// for wait.
func purgeAt(t *testing.T, op *dynamo.Operator, keys []string, sel operate.Selection, now time.Time, wait time.Duration) operate.Result {
	t.Helper()
	res, err := operate.Purge(context.Background(), op, keys, sel, now, operate.Hold{Now: now, Wait: wait}, nil)
	require.NoError(t, err)
	return res
}

// ceilSecond is t rounded up to the second, in UTC, as a purge reports
// when a held row may go.
func ceilSecond(t time.Time) time.Time { return t.Add(time.Second - 1).Truncate(time.Second).UTC() }
