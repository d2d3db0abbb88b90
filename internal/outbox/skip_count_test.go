package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// From a review of e6250bf: a final claim that lapsed under skip is closed and
// counted Expired; if the closing message's own final claim then lapses
// too, the row is expired again (ClosedUnsure since issue 50: the lapsed claim may have sent it) and counted Expired a
// second time. The settle path takes care not to count a closed row twice
// (counted = nil for ClosedDeadLetter); the expire path does not: one
// dead letter, two in the metrics.
func TestSkip_AFinalClaimClosedThenLapsedAgainIsCountedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessShards(t, 1)
	policy := orderedPolicy(outbox.DeadHeadSkip)
	policy.MaxAttempts = 1
	keys := h.stageGroups(t, "events.fifo", []string{"g"}, 2)["g"]
	p, s := keys[0], keys[1]
	log := &sendLog{next: h.sqs}

	// A worker claims p on its final attempt and crashes.
	_, err := h.store.Claim(ctx, p, h.clock.Now(), policy.Lease, policy.MaxAttempts)
	require.NoError(t, err)
	h.clock.Advance(policy.Lease + time.Second)
	res1, err := h.engine(t, policy, log).Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, outbox.ClosedDeadLetter, h.row(t, p).Closed)
	require.Zero(t, res1.Delivered)
	require.Zero(t, res1.BlockedGroups)

	// The closing message's own (final) claim is lost too.
	h.clock.Advance(policy.UnsureWait() + time.Second)
	_, err = h.store.Claim(ctx, p, h.clock.Now(), policy.Lease, policy.MaxAttempts)
	require.NoError(t, err)
	h.clock.Advance(policy.Lease + time.Second)
	res2, err := h.engine(t, policy, log).Sweep(ctx)
	require.NoError(t, err)
	row := h.row(t, p)
	require.Equal(t, outbox.StatusFailed, row.Status)
	require.Equal(t, outbox.ClosedUnsure, row.Closed, "the lapsed claim may have sent the closing message: its place may be closed (issue 50, item 3)")
	require.NotContains(t, log.accepted()["g"], s)
	t.Logf("sweep 1: expired %d dead-lettered %d; sweep 2: expired %d dead-lettered %d, blocked groups %d",
		res1.Expired, res1.DeadLettered, res2.Expired, res2.DeadLettered, res2.BlockedGroups)
	require.Equal(t, 1, res1.Expired+res1.DeadLettered+res2.Expired+res2.DeadLettered, "one row, one dead letter: counted once")
}
