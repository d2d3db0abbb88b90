package dynamo

import (
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
)

// ShardOf is the due-index partition of a key among n shards: FNV-1a of the
// key, mod n, as a decimal string. Shard counts may grow (old rows stay on
// the lower shards, which are still swept) but must never shrink.
func ShardOf(key string, n int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return strconv.Itoa(int(h.Sum32() % uint32(n)))
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
