package outbox

import (
	"fmt"
	"strconv"
	"strings"
)

// Partition is one sweep's share of the due index when the backstop runs as
// Count concurrent sweeps: the shards s with s mod Count = Index. The shares
// are disjoint, so no two partitions' sweeps ever query, and so ever claim,
// the same row, and together they cover every shard. Modulo rather than
// contiguous ranges keeps the shares even as Shards grows, and ties nothing
// stored to Count: it may change at any deploy.
type Partition struct {
	Index int `json:"partition"`
	Count int `json:"of"`
}

// Whole is the partition of a backstop that is one sweep: every shard.
var Whole = Partition{Index: 0, Count: 1}

// Validate reports whether p names one of Count partitions of shards
// due-index shards, each owning at least one shard.
func (p Partition) Validate(shards int) error {
	switch {
	case p.Count < 1:
		return fmt.Errorf("partition count %d: must be at least 1", p.Count)
	case p.Count > shards:
		return fmt.Errorf("%d partitions of %d shards: each partition must own at least one shard, so the shards must be at least the partitions (raise the shards, producers too, or lower the partitions)", p.Count, shards)
	case p.Index < 0 || p.Index >= p.Count:
		return fmt.Errorf("partition %d of %d: must be in [0, %d)", p.Index, p.Count, p.Count)
	}
	return nil
}

// Shards lists the shards of n that p owns, in increasing order.
func (p Partition) Shards(n int) []int {
	var own []int
	for s := p.Index; s < n; s += p.Count {
		own = append(own, s)
	}
	return own
}

// String is p as "index/count", as logs and metrics show it.
func (p Partition) String() string { return fmt.Sprintf("%d/%d", p.Index, p.Count) }

// ParsePartition reads a partition as String writes it, "index/count".
// It checks the form only; Validate checks it against the shards.
func ParsePartition(v string) (Partition, error) {
	i, k, ok := strings.Cut(strings.TrimSpace(v), "/")
	index, ierr := strconv.Atoi(i)
	count, kerr := strconv.Atoi(k)
	if !ok || ierr != nil || kerr != nil {
		return Partition{}, fmt.Errorf("partition %q: want index/count, like 0/4", v)
	}
	return Partition{Index: index, Count: count}, nil
}
