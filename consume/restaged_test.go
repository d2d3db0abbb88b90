package consume_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/consume"
)

// A key Outflow staged again at a later place (a producer's retry past the
// delivered row's retention) is applied once, at its first place; its new
// place is closed, so the group goes on, and never applied twice.
func TestInbox_AKeyAtASecondPlaceIsAppliedOnceAndItsPlaceClosed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		gaps consume.GapPolicy
	}{
		{"waiting at gaps", consume.GapWait},
		{"passing gaps", consume.GapPass},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, table := newInbox(t, tc.gaps)
			ctx := context.Background()
			apply := func(m consume.Message) error { return in.Apply(ctx, m, credit(t, table, "a", m.Key, 1)) }

			// Phase 1: the key at place 1, then again at place 2.
			require.NoError(t, apply(ordered("k1", 1)))
			require.ErrorIs(t, apply(ordered("k1", 2)), consume.ErrDuplicate, "place 2 is closed, not applied")
			require.ErrorIs(t, apply(ordered("k1", 2)), consume.ErrDuplicate, "a copy of place 2 changes nothing")
			require.ErrorIs(t, apply(ordered("k1", 1)), consume.ErrDuplicate, "a copy of place 1 neither")
			require.NoError(t, apply(ordered("k3", 3)), "the group went on past place 2")

			// Phase 2: the key again at place 5, before place 4.
			err := apply(ordered("k1", 5))
			if tc.gaps == consume.GapWait {
				require.ErrorIs(t, err, consume.ErrGap, "its place is closed in its turn, not before")
				require.NoError(t, apply(ordered("k4", 4)))
				err = apply(ordered("k1", 5))
			}
			require.ErrorIs(t, err, consume.ErrDuplicate)
			require.NoError(t, apply(ordered("k6", 6)))

			balance, history := account(t, table, "a")
			want := []string{"k1", "k3", "k4", "k6"}
			if tc.gaps == consume.GapPass {
				want = []string{"k1", "k3", "k6"} // place 4 passed
			}
			require.Equal(t, want, history)
			require.Equal(t, len(want), balance)
		})
	}
}
