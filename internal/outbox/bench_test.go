package outbox_test

import (
	"testing"

	"github.com/outflowhq/outflow/internal/bench"
)

// Engine overhead with zero-latency fakes; make bench reports these per row.
func BenchmarkSweep_1000Rows(b *testing.B)      { bench.SweepOverhead(1000)(b) }
func BenchmarkDeliverKeys_100Keys(b *testing.B) { bench.WakeOverhead(100)(b) }
