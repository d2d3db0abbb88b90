package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// sameAttempt claims every row at attempt 1, as a store does for a row
// claimed again after a release gave its attempt back.
type sameAttempt struct{ outbox.Store }

func (sameAttempt) Claim(_ context.Context, key string, _ time.Time, _ time.Duration, _ int) (outbox.Row, error) {
	return outbox.Row{Key: key, Attempt: 1}, nil
}

// TestStalls_ARowClaimedAgainAtTheSameAttemptStallsAtTheRateNotEveryTime
// claims one row 2,000 times at one attempt: a stall is drawn per claim,
// so about 5% of them stall. Drawn from the key and attempt alone, the
// row stalled at every claim (or never), and an ordered group behind it
// stood still while the faults ran.
func TestStalls_ARowClaimedAgainAtTheSameAttemptStallsAtTheRateNotEveryTime(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 993052609} {
		stalls := 0
		s := &faults.Stalls{Plan: faults.NewPlan(seed, map[faults.Kind]float64{faults.StallClaimed: 0.05}),
			Advance: func(time.Duration) { stalls++ }, Jump: time.Minute}
		store := s.Store(sameAttempt{})
		for range 2000 {
			_, err := store.Claim(context.Background(), "row", time.Time{}, time.Minute, 6)
			require.NoError(t, err)
		}
		require.InDelta(t, 100, stalls, 40, "seed %d: stalls in 2,000 claims at 5%%", seed)
	}
}
