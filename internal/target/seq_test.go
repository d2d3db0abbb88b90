package target_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// The place takes one of SQS's 10 attributes: an ordered row with 8 of its
// own is refused (the producer refuses it at staging), an unordered one is
// not.
func TestValidate_AnOrderedRowsPlaceCountsTowardTheAttributeLimit(t *testing.T) {
	t.Parallel()
	attrs := map[string]string{}
	for i := range 8 {
		attrs["a"+strconv.Itoa(i)] = "v"
	}
	fifo := target.Target{Kind: target.KindSQS, FIFO: true}
	row := outbox.Row{Key: "k", Group: "g", Payload: []byte("p"), Attempt: 1, Attributes: attrs}
	require.NoError(t, target.Validate(row, fifo, 0))
	row.Seq = 1
	require.ErrorIs(t, target.Validate(row, fifo, 0), target.ErrTooManyAttributes)
	delete(attrs, "a0")
	require.NoError(t, target.Validate(row, fifo, 0))
}
