package faults_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/faults"
)

// TestPlan_HitsAtItsRateAndIndependentlyAcrossAttempts guards the fault
// plan's hashing: one row's consecutive attempts differ only in their last
// byte, and must still be decided independently, or one unlucky row fails
// every attempt and the soak's duplicate and dead-letter counts mean little.
func TestPlan_HitsAtItsRateAndIndependentlyAcrossAttempts(t *testing.T) {
	t.Parallel()
	const keys, attempts, rate = 20000, 6, 0.05
	for _, seed := range []uint64{1, 562885775} {
		plan := faults.NewPlan(seed, map[faults.Kind]float64{faults.SendEntry: rate})
		hits, pairs, hitsAfterHit := 0, 0, 0
		for k := range keys {
			key := "soak-" + strconv.Itoa(k)
			prev := false
			for a := 1; a <= attempts; a++ {
				hit := plan.Hit(faults.SendEntry, key, a)
				if hit {
					hits++
				}
				if prev {
					pairs++
					if hit {
						hitsAfterHit++
					}
				}
				prev = hit
			}
		}
		got := float64(hits) / (keys * attempts)
		require.InDelta(t, rate, got, rate/10, "seed %d: hit rate", seed)
		require.InDelta(t, rate, float64(hitsAfterHit)/float64(pairs), rate/2, "seed %d: hit rate right after a hit", seed)
	}
}
