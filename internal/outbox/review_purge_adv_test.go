package outbox_test

// Adversarial review of the purge hold (71ba2ec), adopted: the attacks
// that broke it pass since (a stray or implausible unsure_at no longer
// holds a row for ever; held_until is rounded up and compared as a time).
// One attack is left out: an unsure_at with a fraction of a millisecond
// is held, as it should be, but counted as skipped, since the row cannot
// be decoded; no dispatcher writes one.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/operate"
	"github.com/outflowhq/outflow/internal/outbox"
)

// ATTACK (invariant 2): a dead letter whose unsure_at is not a number (a
// stray value). The engine's Link reads such a value as "now" (the group
// waits for ever under skip, and is blocked under block), so the purge is
// the operator's only way out, and before 71ba2ec it deleted the row. Now
// the condition `unsure_at <= :n` is false for a string for ever, and the
// row is reported as "skipped (not dead letters)", a day later as at once.
func TestAdv_ADeadLetterWithAStrayUnsureAtCanStillBePurged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	p := orderedPolicy(outbox.DeadHeadBlock)
	p.MaxAttempts = 1
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	head, err := h.store.Claim(ctx, keys[0], h.clock.Now(), p.Lease, p.MaxAttempts)
	require.NoError(t, err)
	now := h.clock.Now()
	head.UnsureAt = now
	require.NoError(t, h.store.DeadLetter(ctx, head, now, []outbox.AttemptError{{At: now, Attempt: 1, Message: "send: timeout", Unsure: true}}))
	h.setRaw(t, keys[0], dynamo.AttrUnsureAt, &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339)})
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)

	// A day on, far past any unsure wait.
	h.clock.Advance(24 * time.Hour)
	res := purgeAt(t, op, keys[:1], operate.Selection{}, h.clock.Now(), p.UnsureWait())
	t.Logf("a day later: %+v", res)
	require.Equal(t, 1, res.Done, "a dead letter with a stray unsure_at can never be purged: reported %+v", res)
}

// ATTACK (invariant 2): as above with a number DynamoDB and moto both
// compare: an unsure_at written in microseconds (or by a dispatcher whose
// clock ran far ahead). The engine holds the group for as long; before
// 71ba2ec the purge was the way out, now there is none (no --force).
func TestAdv_ADeadLetterWithAFarFutureUnsureAtCanStillBePurged(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	p := orderedPolicy(outbox.DeadHeadBlock)
	p.MaxAttempts = 1
	at := stageDead(t, h, p, outbox.Row{Key: "micro", Queue: "q", Payload: []byte(`{}`)}, true)
	h.setRaw(t, "micro", dynamo.AttrUnsureAt, &types.AttributeValueMemberN{Value: strconv.FormatInt(at.UnixMicro(), 10)})
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)
	h.clock.Advance(365 * 24 * time.Hour)
	res := purgeAt(t, op, []string{"micro"}, operate.Selection{}, h.clock.Now(), p.UnsureWait())
	require.Equal(t, 1, res.Done, "a year later: %+v", res)
}

// HOLDS? the report's HeldUntil is the moment the window closes, to the
// second, truncated: the docs say "purge them after that". At that very
// second (plus a few hundred ms) the purge still holds the row.
func TestAdv_PurgingAtTheReportedHeldUntilPurges(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	p := testPolicy()
	p.MaxAttempts = 1
	// Put the unsure send late in its second.
	base := h.clock.Now()
	h.clock.Advance(time.Duration(999-base.UnixMilli()%1000) * time.Millisecond)
	stageDead(t, h, p, outbox.Row{Key: "late-in-second", Queue: "q", Payload: []byte(`{}`)}, true)
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)

	res := purgeAt(t, op, []string{"late-in-second"}, operate.Selection{}, h.clock.Now(), p.UnsureWait())
	require.Equal(t, 1, res.Held)
	until := res.HeldUntil
	after := until.Add(500 * time.Millisecond) // "after that"
	res = purgeAt(t, op, []string{"late-in-second"}, operate.Selection{}, after, p.UnsureWait())
	require.Equal(t, 1, res.Done, "purged half a second after the reported held_until %s: %+v", until, res)
}

// HOLDS? a row redriven after an unsure send and dead again for certain
// (definite failure) keeps its unsure_at: the purge holds it.
func TestAdv_ARedrivenRowDeadAgainDefinitelyIsStillHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	p := testPolicy()
	p.MaxAttempts = 1
	at := stageDead(t, h, p, outbox.Row{Key: "again", Queue: "q", Payload: []byte(`{}`)}, true)
	h.clock.Advance(time.Second)
	require.NoError(t, h.store.Redrive(ctx, "again", h.clock.Now()))
	row, err := h.store.Claim(ctx, "again", h.clock.Now(), p.Lease, p.MaxAttempts)
	require.NoError(t, err)
	row.UnsureAt = time.Time{} // the engine's row carries what it read; a definite failure adds none
	now := h.clock.Now()
	require.NoError(t, h.store.DeadLetter(ctx, row, now, []outbox.AttemptError{{At: now, Attempt: 1, Message: "refused"}}))
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)
	h.clock.Advance(time.Second)
	res := purgeAt(t, op, nil, operate.Selection{Queue: "q"}, h.clock.Now(), p.UnsureWait())
	require.Equal(t, operate.Result{Action: "purge", Held: 1, HeldUntil: ceilSecond(at.Add(p.UnsureWait()))}, res)
}

// HOLDS? millisecond edges: held one ms before unsure_at + wait, purged at
// it, with a sub-millisecond wait (the default lease's 159333.33 ms).
func TestAdv_TheMillisecondEdgeOfTheWait(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	p := outbox.DefaultPolicy()
	p.MaxAttempts = 1
	at := stageDead(t, h, p, outbox.Row{Key: "edge", Queue: "q", Payload: []byte(`{}`)}, true)
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)
	wait := p.UnsureWait()
	require.NotZero(t, wait%time.Millisecond, "a wait with a fraction of a ms")
	// The engine lets the group go at !now.Before(at+wait).
	engineGoes := at.Add(wait)
	res := purgeAt(t, op, []string{"edge"}, operate.Selection{}, engineGoes.Add(-time.Nanosecond), wait)
	require.Equal(t, 1, res.Held, "a ns before the engine would let go: %+v", res)
	res = purgeAt(t, op, []string{"edge"}, operate.Selection{}, engineGoes, wait)
	require.Equal(t, 1, res.Done, "%+v", res)
}

// ATTACK (counting): HeldUntil was the latest window's end compared as
// RFC 3339 strings, so a year past 9999 sorted before 2026. It is a time
// now; an unsure_at that far ahead is no dispatcher's and holds nothing
// (TestAdv_ADeadLetterWithAFarFutureUnsureAtCanStillBePurged), so the
// later window here is one a dispatcher's clock ahead of this one gives.
func TestAdv_HeldUntilIsTheLatestWindow(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 1)
	p := testPolicy()
	p.MaxAttempts = 1
	stageDead(t, h, p, outbox.Row{Key: "near", Queue: "q", Payload: []byte(`{}`)}, true)
	stageDead(t, h, p, outbox.Row{Key: "far", Queue: "q", Payload: []byte(`{}`)}, true)
	far := h.clock.Now().Add(10 * time.Minute)
	h.setRaw(t, "far", dynamo.AttrUnsureAt, &types.AttributeValueMemberN{Value: strconv.FormatInt(far.UnixMilli(), 10)})
	op, err := dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: h.store.Table(), Shards: 1})
	require.NoError(t, err)
	res := purgeAt(t, op, []string{"near", "far"}, operate.Selection{}, h.clock.Now(), p.UnsureWait())
	require.Equal(t, 2, res.Held)
	require.Equal(t, ceilSecond(time.UnixMilli(far.UnixMilli()).Add(p.UnsureWait())), res.HeldUntil)
}
