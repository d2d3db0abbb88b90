package bench

import (
	"testing"

	"github.com/outflowhq/outflow/internal/outbox"
)

// The ordered synthetic store chains its groups, the engine delivers them
// in order, and the sink would notice if it did not.
func TestGroupSweepKeepsOrder(t *testing.T) {
	for _, c := range []struct{ rows, size int }{{60, 60}, {200, 5}} {
		g, err := GroupSweep(c.rows, c.size, true, 16, 100, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if g.OutOfOrder != 0 {
			t.Errorf("groups of %d: %d rows out of order", c.size, g.OutOfOrder)
		}
		if g.Calls["Link"] > int64(c.rows) {
			t.Errorf("groups of %d: %d Link reads for %d rows; the due index gives each row's predecessor, so at most one read a row", c.size, g.Calls["Link"], c.rows)
		}
	}
}

// The sink counts a row that skips ahead of its group and one that comes
// after a later row.
func TestSinkCountsRowsOutOfOrder(t *testing.T) {
	s := NewGroupSynthStore(4, 1, 4, true, 1, epoch)
	var rows []outbox.Row
	for _, i := range []int{0, 2, 1, 3} {
		_, seq, _ := s.group(i)
		rows = append(rows, outbox.Row{Group: "g0", Seq: seq})
	}
	d := &Sink{}
	d.Deliver(t.Context(), FIFOQueue, rows)
	if got := d.OutOfOrder(); got != 2 {
		t.Errorf("OutOfOrder = %d, want 2 (seq 3 early, seq 2 late)", got)
	}
}

// First arrivals are checked per group of consecutive keys.
func TestOutOfOrderFirstArrivals(t *testing.T) {
	first := []string{Key(5), Key(0), Key(6), Key(1), Key(2), Key(8), Key(7), Key(9)}
	if got := outOfOrder(first, 5); got != 2 {
		t.Errorf("outOfOrder = %d, want 2 (row 8 before 7, then 7 late)", got)
	}
}
