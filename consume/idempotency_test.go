package consume_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
	"github.com/outflowhq/outflow/internal/awstest"
)

func newIdempotency(t *testing.T) (*consume.Idempotency, string) {
	t.Helper()
	table := newTable(t)
	idem, err := consume.NewIdempotency(awstest.DynamoDB(t), consume.IdempotencyConfig{Table: table, Consumer: "mailer", Hold: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	return idem, table
}

func TestIdempotency_RunsAnEffectOnceAndSkipsLaterCopies(t *testing.T) {
	t.Parallel()
	idem, _ := newIdempotency(t)
	ctx := context.Background()
	var runs atomic.Int32
	effect := func(context.Context) error { runs.Add(1); return nil }
	m := consume.Message{Key: "k1", Attempt: 1}
	require.NoError(t, idem.Do(ctx, m, effect))
	require.ErrorIs(t, idem.Do(ctx, m, effect), consume.ErrDuplicate)
	require.NoError(t, idem.Do(ctx, consume.Message{Key: "k2", Attempt: 1}, effect))
	require.EqualValues(t, 2, runs.Load())
}

// A copy that arrives while another runs is retried later; a failed
// effect releases its record at once, for the retry to run it.
func TestIdempotency_RefusesACopyWhileAnotherRunsAndRetriesAFailedEffect(t *testing.T) {
	t.Parallel()
	idem, _ := newIdempotency(t)
	ctx := context.Background()
	m := consume.Message{Key: "k1", Attempt: 1}
	var runs atomic.Int32
	err := idem.Do(ctx, m, func(ctx context.Context) error {
		runs.Add(1)
		require.ErrorIs(t, idem.Do(ctx, m, func(context.Context) error { runs.Add(1); return nil }), consume.ErrInProgress)
		return errors.New("the mail server is down")
	})
	require.ErrorContains(t, err, "mail server")
	require.NoError(t, idem.Do(ctx, m, func(context.Context) error { runs.Add(1); return nil }))
	require.EqualValues(t, 2, runs.Load(), "the copy refused in progress never ran")
}

// A hold that expires (its holder crashed, or ran too long) is taken over
// by a later copy; the first holder's completion is then refused, saying
// the effect may have run twice.
func TestIdempotency_AnExpiredHoldIsTakenOverAndItsHolderTold(t *testing.T) {
	t.Parallel()
	idem, table := newIdempotency(t)
	ctx := context.Background()
	later, err := consume.NewIdempotency(awstest.DynamoDB(t), consume.IdempotencyConfig{Table: table, Consumer: "mailer", Hold: time.Minute})
	require.NoError(t, err)
	consume.SetNow(later, func() time.Time { return time.Now().Add(2 * time.Minute) })
	m := consume.Message{Key: "k1", Attempt: 1}
	err = idem.Do(ctx, m, func(ctx context.Context) error {
		return later.Do(ctx, m, func(context.Context) error { return nil })
	})
	require.ErrorIs(t, err, consume.ErrHoldLost)
	require.ErrorIs(t, idem.Do(ctx, m, func(context.Context) error { return nil }), consume.ErrDuplicate)
}
