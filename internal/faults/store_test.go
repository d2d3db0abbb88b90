package faults_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/faults"
	"github.com/outflowhq/outflow/internal/outbox"
)

// answering is a store whose claims and head-check reads all succeed.
type answering struct{ outbox.Store }

func (answering) Claim(_ context.Context, key string, _ time.Time, _ time.Duration, _ int) (outbox.Row, error) {
	return outbox.Row{Key: key, Attempt: 1}, nil
}

func (answering) Link(context.Context, string) (outbox.Link, error) {
	return outbox.Link{Found: true}, nil
}

// TestStore_ThrottlesEachClaimAndReadByItsKeyAndNumber guards the soak's
// replay: a claim or a head check's read carries no attempt, so its
// throttle is drawn from the call's number for its key. Two runs that make
// the same calls draw the same throttles, whatever their clocks read (the
// soak's virtual clock starts at the wall clock's time), and the calls of
// one key are drawn apart, not all throttled or none.
func TestStore_ThrottlesEachClaimAndReadByItsKeyAndNumber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	throttled := func(start time.Time) []bool {
		s := faults.Store{Store: answering{}, Plan: faults.NewPlan(7, map[faults.Kind]float64{faults.Throttle: 0.3})}
		var got []bool
		for i := range 200 {
			now := start.Add(time.Duration(i) * time.Millisecond)
			key := "k" + strconv.Itoa(i%5)
			_, err := s.Claim(ctx, key, now, time.Minute, 3)
			got = append(got, errors.Is(err, faults.ErrInjected))
			_, err = s.Link(ctx, key)
			got = append(got, errors.Is(err, faults.ErrInjected))
		}
		return got
	}
	first := throttled(time.Unix(1_000_000, 0))
	require.Equal(t, first, throttled(time.Now()), "the same calls draw the same throttles, whatever the clock")
	require.Contains(t, first, true)
	require.Contains(t, first, false)
}
