package capacity

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClient_SurfacesAThrottleOnlyAfterTheSDKsRetries settles a row on a
// shard whose ceiling has no room left, and counts the attempts the
// modeled SDK makes before the error reaches the engine: every attempt it
// has, or fewer when its retry quota runs out.
func TestClient_SurfacesAThrottleOnlyAfterTheSDKsRetries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		tokens    int
		attempts  int64
		quotaHits bool
	}{
		{name: "full quota: every attempt", tokens: 500, attempts: 4},
		{name: "quota for two retries", tokens: 10, attempts: 3, quotaHits: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := DefaultLimits()
				l.ShardCeiling, l.SDKRetryTokens = 0.001, c.tokens // no room, and none comes back in time
				st := NewStore(l, 1, Queue)
				st.Backlog(1, time.Now().Add(-time.Minute), time.Now().Add(-time.Second))
				st.buckets[0].tokens = 0
				cl := st.Client()
				row, err := cl.Claim(context.Background(), Key(0), time.Now(), time.Minute, 8)
				require.NoError(t, err, "a claim writes no index entry, so it is never throttled")
				err = cl.Done(context.Background(), row, time.Now())
				require.ErrorIs(t, err, ErrThrottled)
				require.Equal(t, c.quotaHits, errors.Is(err, errQuota))
				require.Equal(t, c.attempts, st.stats.Throttles)
				require.Equal(t, int64(1), st.stats.Surfaced)
				require.Equal(t, 1, st.Left(), "the row stays claimed")
			})
		})
	}
}

// TestStore_QueryDuePagesAShardOldestFirstWithoutSettledRows pages one
// shard after some of its rows are settled and one is retried later.
func TestStore_QueryDuePagesAShardOldestFirstWithoutSettledRows(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := NewStore(DefaultLimits(), 1, Queue)
		now := time.Now()
		st.Backlog(10, now.Add(-time.Hour), now.Add(-time.Second))
		cl := st.Client()
		ctx := context.Background()
		for _, i := range []int{0, 3} {
			row, err := cl.Claim(ctx, Key(i), time.Now(), time.Minute, 8)
			require.NoError(t, err)
			require.NoError(t, cl.Done(ctx, row, time.Now()))
		}
		row, err := cl.Claim(ctx, Key(1), time.Now(), time.Minute, 8)
		require.NoError(t, err)
		require.NoError(t, cl.Retry(ctx, row, time.Now().Add(-time.Millisecond), nil))
		var keys []string
		refs, more, err := cl.QueryDue(ctx, 0, time.Now(), nil, 4)
		require.NoError(t, err)
		require.True(t, more)
		for len(refs) > 0 {
			for _, r := range refs {
				keys = append(keys, r.Key)
			}
			if !more {
				break
			}
			refs, more, err = cl.QueryDue(ctx, 0, time.Now(), &refs[len(refs)-1], 4)
			require.NoError(t, err)
		}
		require.Equal(t, []string{"r2", "r4", "r5", "r6", "r7", "r8", "r9", "r1"}, keys)
	})
}
