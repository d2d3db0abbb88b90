package outbox_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestPartition_SharesTheShardsWithoutOverlapOrGap(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 200).Draw(t, "shards")
		k := rapid.IntRange(1, n).Draw(t, "partitions")
		owner := make([]int, n)
		for i := range owner {
			owner[i] = -1
		}
		for i := range k {
			p := outbox.Partition{Index: i, Count: k}
			require.NoError(t, p.Validate(n))
			own := p.Shards(n)
			require.NotEmpty(t, own, "partition %s owns a shard", p)
			require.True(t, slices.IsSorted(own))
			for _, s := range own {
				require.Equal(t, -1, owner[s], "shard %d has one owner", s)
				owner[s] = i
			}
		}
		require.NotContains(t, owner, -1, "every shard is swept")
	})
}

func TestPartition_RefusesAShareThatDoesNotFit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p      outbox.Partition
		shards int
		want   string
	}{
		{outbox.Partition{Index: 0, Count: 5}, 4, "5 partitions of 4 shards: each partition must own at least one shard"},
		{outbox.Partition{Index: 0, Count: 0}, 4, "partition count 0: must be at least 1"},
		{outbox.Partition{Index: 2, Count: 2}, 4, "partition 2 of 2: must be in [0, 2)"},
		{outbox.Partition{Index: -1, Count: 2}, 4, "partition -1 of 2"},
	}
	for _, tt := range tests {
		t.Run(tt.p.String(), func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, tt.p.Validate(tt.shards), tt.want)
		})
	}
}

// shardLog is a store that records the shards each engine queries and
// the rows it claims.
type shardLog struct {
	outbox.Store
	mu      sync.Mutex
	queried map[int]int
	claimed *claimCount
}

// claimCount counts the successful claims of every key, across engines.
type claimCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *shardLog) QueryDue(ctx context.Context, shard int, now time.Time, after *outbox.DueRef, limit int) ([]outbox.DueRef, bool, error) {
	s.mu.Lock()
	s.queried[shard]++
	s.mu.Unlock()
	return s.Store.QueryDue(ctx, shard, now, after, limit)
}

func (s *shardLog) Claim(ctx context.Context, key string, now time.Time, lease time.Duration, maxAttempts int) (outbox.Row, error) {
	row, err := s.Store.Claim(ctx, key, now, lease, maxAttempts)
	if err == nil {
		s.claimed.mu.Lock()
		s.claimed.n[key]++
		s.claimed.mu.Unlock()
	}
	return row, err
}

func TestPartitions_KSweepsDrainABacklogWithoutClaimingAnyRowTwice(t *testing.T) {
	t.Parallel()
	const shards, k = 8, 4
	h := newHarnessShards(t, shards)
	ctx := context.Background()

	// Phase 1: a backlog of unordered rows and ordered groups.
	var all []string
	for _, r := range append(rowsFor("orders", 120, ""), rowsFor("emails", 80, "")...) {
		h.stage(t, r)
		all = append(all, r.Key)
	}
	for g := range 8 {
		for i := range 6 {
			key := "g" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
			require.NoError(t, h.store.StageOrdered(ctx, outbox.Row{Key: key, Queue: "events.fifo", Group: "g" + strconv.Itoa(g), Payload: []byte(key)}, h.clock.Now()))
			all = append(all, key)
		}
	}

	// Phase 2: K sweeps side by side, one per partition.
	claims := &claimCount{n: map[string]int{}}
	sent := &sendLog{next: h.sqs}
	results := make([]outbox.Result, k)
	logs := make([]*shardLog, k)
	var wg sync.WaitGroup
	var sweepErrs goErrs
	for i := range k {
		logs[i] = &shardLog{Store: h.store, queried: map[int]int{}, claimed: claims}
		e, err := outbox.New(logs[i], sent, testPolicy(), outbox.WithClock(h.clock.Now))
		require.NoError(t, err)
		wg.Go(func() {
			var err error
			results[i], err = e.SweepPartition(ctx, outbox.Partition{Index: i, Count: k})
			sweepErrs.add(err)
		})
	}
	wg.Wait()
	require.NoError(t, sweepErrs.err())

	// Phase 3: every row claimed once, sent once, in group order; no
	// refused write; each sweep queried only its own shards.
	var claimed, conflicts int
	for i, res := range results {
		claimed += res.Claimed
		conflicts += res.Conflicts
		require.Equal(t, "drained", res.Stopped, "partition %d", i)
		var queried []int
		for s := range logs[i].queried {
			queried = append(queried, s)
		}
		slices.Sort(queried)
		require.Equal(t, outbox.Partition{Index: i, Count: k}.Shards(shards), queried, "partition %d queried its shards only", i)
	}
	require.Zero(t, conflicts, "partitioned sweeps never race for a row")
	require.Len(t, claims.n, len(all))
	for key, n := range claims.n {
		require.Equal(t, 1, n, "row %s claimed once", key)
	}
	require.Equal(t, len(all), claimed)
	var sentKeys []string
	for _, keys := range sent.accepted() {
		sentKeys = append(sentKeys, keys...)
	}
	require.ElementsMatch(t, all, sentKeys, "every row sent once")
	for g := range 8 {
		want := make([]string, 6)
		for i := range want {
			want[i] = "g" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
		}
		require.Equal(t, want, sent.accepted()["g"+strconv.Itoa(g)], "group g%d in staging order", g)
	}
	for _, key := range all {
		h.gone(t, key)
	}
}

func TestPartitions_AnOrderedGroupLivesInOnePartition(t *testing.T) {
	t.Parallel()
	const shards = 8
	h := newHarnessShards(t, shards)
	ctx := context.Background()
	for i := range 12 {
		key := "hot-" + strconv.Itoa(i)
		require.NoError(t, h.store.StageOrdered(ctx, outbox.Row{Key: key, Queue: "events.fifo", Group: "hot", Payload: []byte(key)}, h.clock.Now()))
	}
	home, err := strconv.Atoi(dynamo.ShardOf(dynamo.GroupKey("events.fifo", "hot"), shards))
	require.NoError(t, err)
	for s := range shards {
		refs, _, err := h.store.QueryDue(ctx, s, h.clock.Now(), nil, 100)
		require.NoError(t, err)
		if s == home {
			require.Len(t, refs, 12, "the group's rows are all on its shard")
		} else {
			require.Empty(t, refs, "shard %d holds none of the group", s)
		}
	}
	// The partition that owns the group's shard drains the group in one
	// sweep, one row after another; the others find nothing.
	for i := range 4 {
		p := outbox.Partition{Index: i, Count: 4}
		res, err := h.engine(t, testPolicy(), nil).SweepPartition(ctx, p)
		require.NoError(t, err)
		if home%4 == i {
			require.Equal(t, 12, res.Delivered, "partition %s drains the whole group", p)
		} else {
			require.Zero(t, res.Claimed, "partition %s", p)
		}
	}
}

func TestPartitions_ASweepWithNothingDueEndsAfterOneQueryPerShard(t *testing.T) {
	t.Parallel()
	const shards = 4
	h := newHarnessShards(t, shards)
	// Only rows of partition 0 of 2 (shards 0 and 2).
	staged := 0
	for i := 0; staged < 10; i++ {
		r := rowsFor("orders", i+1, "")[i]
		if n, _ := strconv.Atoi(dynamo.ShardFor(r, shards)); n%2 == 0 {
			h.stage(t, r)
			staged++
		}
	}
	log := &shardLog{Store: h.store, queried: map[int]int{}, claimed: &claimCount{n: map[string]int{}}}
	e, err := outbox.New(log, h.sqs, testPolicy(), outbox.WithClock(h.clock.Now))
	require.NoError(t, err)
	res, err := e.SweepPartition(context.Background(), outbox.Partition{Index: 1, Count: 2})
	require.NoError(t, err)
	require.Equal(t, "drained", res.Stopped)
	require.Zero(t, res.Claimed)
	require.Equal(t, map[int]int{1: 1, 3: 1}, log.queried, "one query per shard of its own, nothing more")
}

func TestSweepPartition_RefusesAPartitionTheShardsCannotHold(t *testing.T) {
	t.Parallel()
	h := newHarnessShards(t, 2)
	res, err := h.engine(t, testPolicy(), nil).SweepPartition(context.Background(), outbox.Partition{Index: 0, Count: 3})
	require.ErrorContains(t, err, "3 partitions of 2 shards")
	require.Equal(t, "refused", res.Stopped)
}
