package dynamo_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

func TestStore_StageRefusesAnItemWithNoRoomForItsDeliveryState(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	// Under the emulator's own limit, so the put alone would succeed, but
	// every claim of it would then be refused for size.
	row := outbox.Row{Key: "big", Queue: "orders", Payload: []byte(strings.Repeat("x", 398_000))}
	err := st.Stage(context.Background(), row, t0)
	require.ErrorContains(t, err, "item too large")
	require.Nil(t, get(t, st, "big"), "nothing staged")
}

func TestStore_ARowAtTheLargestMessageLimitLivesItsWholeLife(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	// Key, group and attributes at their limits, the message at the cap.
	key := strings.Repeat("k", 128)
	attrs := map[string]string{}
	for i := range 8 {
		attrs["attr"+strconv.Itoa(i)] = strings.Repeat("v", 250)
	}
	row := outbox.Row{Key: key, Queue: "events.fifo", Group: strings.Repeat("g", 128), Attributes: attrs, Attempt: outbox.MaxAttemptsLimit}
	row.Payload = []byte("x")
	require.NoError(t, target.Validate(row, target.Target{Kind: target.KindSQS, FIFO: true}, dynamo.MaxMessageBytes))
	for lo, hi := 1, dynamo.MaxMessageBytes; lo < hi; { // the largest payload the cap allows
		mid := (lo + hi + 1) / 2
		row.Payload = []byte(strings.Repeat("x", mid))
		if target.Validate(row, target.Target{Kind: target.KindSQS, FIFO: true}, dynamo.MaxMessageBytes) == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
		row.Payload = []byte(strings.Repeat("x", lo))
	}
	row.Attempt = 0
	require.NoError(t, st.Stage(ctx, row, t0))

	// Every attempt fails with a long error, then the budget is spent: the
	// history and the dead-letter keys fit.
	long := strings.Repeat("e", 4*outbox.MaxErrorBytes)
	now := t0
	for range maxAttempts - 1 {
		c := claim(t, st, key, now)
		hist := append(c.Errors, outbox.AttemptError{At: now, Attempt: c.Attempt, Message: outbox.TruncateError(long)})
		if len(hist) > outbox.ErrorHistory {
			hist = hist[1:]
		}
		require.NoError(t, st.Retry(ctx, c, now, hist))
		now = now.Add(time.Second)
	}
	c := claim(t, st, key, now)
	require.NoError(t, st.DeadLetter(ctx, c, now, append(c.Errors, outbox.AttemptError{At: now, Attempt: c.Attempt, Message: outbox.TruncateError(long)})))
	require.Equal(t, outbox.StatusFailed, get(t, st, key).Status)
	require.NoError(t, st.Redrive(ctx, key, now), "and an operator can redrive it")
}

func TestStore_QueryDueReadsKeysWhateverCreatedAtHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	// Rows of one shard, half with a created_at of the wrong type, as a
	// hand-written producer might leave it.
	var keys []string
	for i := 0; len(keys) < 12; i++ {
		key := "q-" + strconv.Itoa(i)
		if dynamo.ShardOf(key, st.Shards()) != "0" {
			continue
		}
		keys = append(keys, key)
		putItem(t, st, key, func(it map[string]types.AttributeValue) {
			it["due_at"] = n(t0.UnixMilli() + int64(len(keys)))
			if len(keys)%2 == 0 {
				it["created_at"] = s("yesterday")
			}
		})
	}
	// The SDK's decoder walks a map in random order and stops at the first
	// bad attribute, so read many times: every read must find every key.
	for range 20 {
		seen := map[string]bool{}
		var after *outbox.DueRef
		for {
			refs, more, err := st.QueryDue(ctx, 0, t0.Add(time.Hour), after, 5)
			require.NoError(t, err)
			for _, r := range refs {
				require.NotEmpty(t, r.Key)
				require.False(t, r.DueAt.IsZero(), r.Key)
				require.False(t, seen[r.Key], "no entry twice: %s", r.Key)
				seen[r.Key] = true
			}
			if !more || len(refs) == 0 {
				break
			}
			after = &refs[len(refs)-1]
		}
		require.Len(t, seen, len(keys), "every row, once")
	}
}

func TestStore_ARowStagedAtTheEdgeIsClaimedAgainAfterItsHistoryGrows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, 0)
	// The largest payload staging accepts for this row.
	row := outbox.Row{Key: "edge", Queue: "orders"}
	lo, hi := 1, dynamo.ItemLimit
	for lo < hi {
		mid := (lo + hi + 1) / 2
		row.Payload = []byte(strings.Repeat("x", mid))
		if _, err := st.StageInput(row, t0); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	row.Payload = []byte(strings.Repeat("x", lo))
	require.Greater(t, lo, dynamo.ItemLimit-dynamo.Growth("orders")-200)
	require.NoError(t, st.Stage(ctx, row, t0))
	over := row
	over.Key, over.Payload = "over", append([]byte("x"), row.Payload...)
	require.ErrorIs(t, st.Stage(ctx, over, t0), dynamo.ErrItemTooLarge, "one byte more is refused")

	// Its history fills up to the full five errors at the largest size;
	// every claim still reads it as a row, never as too large.
	long := outbox.TruncateError(strings.Repeat("e", 2*outbox.MaxErrorBytes))
	now := t0
	var hist []outbox.AttemptError
	for attempt := 1; attempt <= outbox.ErrorHistory+1; attempt++ {
		c, err := st.Claim(ctx, "edge", now, lease, 100)
		require.NoError(t, err)
		require.Empty(t, c.Malformed, "attempt %d", attempt)
		hist = append(hist, outbox.AttemptError{At: now, Attempt: c.Attempt, Message: long})
		if len(hist) > outbox.ErrorHistory {
			hist = hist[1:]
		}
		require.NoError(t, st.Retry(ctx, c, now, hist))
		now = now.Add(time.Second)
	}
}
