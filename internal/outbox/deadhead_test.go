package outbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
)

// TestLink_BlocksOnlyADeadPredecessorUnderBlock is the head check's rule
// as operators see it: a predecessor holds its successor for good only as
// a dead letter (or in a state no writer leaves) under block; pending and
// claimed rows hold it only until they settle.
func TestLink_BlocksOnlyADeadPredecessorUnderBlock(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		link          outbox.Link
		block, settle map[outbox.DeadHead]bool
	}{
		{outbox.Link{}, nil, map[outbox.DeadHead]bool{outbox.DeadHeadBlock: true, outbox.DeadHeadSkip: true}},
		{outbox.Link{Found: true, Status: outbox.StatusDone}, nil, map[outbox.DeadHead]bool{outbox.DeadHeadBlock: true, outbox.DeadHeadSkip: true}},
		{outbox.Link{Found: true, Status: outbox.StatusPending}, nil, nil},
		{outbox.Link{Found: true, Status: outbox.StatusClaimed}, nil, nil},
		{outbox.Link{Found: true, Status: outbox.StatusFailed}, map[outbox.DeadHead]bool{outbox.DeadHeadBlock: true}, map[outbox.DeadHead]bool{outbox.DeadHeadSkip: true}},
		{outbox.Link{Found: true, Status: "mangled"}, map[outbox.DeadHead]bool{outbox.DeadHeadBlock: true}, map[outbox.DeadHead]bool{outbox.DeadHeadSkip: true}},
	} {
		for _, dh := range []outbox.DeadHead{outbox.DeadHeadBlock, outbox.DeadHeadSkip} {
			require.Equal(t, tt.block[dh], tt.link.Blocks(dh), "%+v under %s blocks", tt.link, dh)
			require.Equal(t, tt.settle[dh], tt.link.Settles(dh), "%+v under %s settles", tt.link, dh)
		}
	}
}

func TestDeadLetterBlocks_FollowsTheRoutesPolicyAndTheGroup(t *testing.T) {
	t.Parallel()
	ordered := map[string]outbox.DeadHead{"a.fifo": outbox.DeadHeadBlock, "b.fifo": outbox.DeadHeadSkip}
	for _, tt := range []struct {
		name  string
		queue string
		seq   int64
		want  bool
	}{
		{"a block route's ordered row", "a.fifo", 1, true},
		{"a later row of a block route", "a.fifo", 7, true},
		{"a skip route's ordered row", "b.fifo", 1, false},
		{"a row in no ordered group", "a.fifo", 0, false},
		// The engine holds an unlisted route's ordered rows to the default.
		{"an unlisted route's ordered row", "c.fifo", 2, true},
		{"an unlisted route's unordered row", "orders", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, outbox.DeadLetterBlocks(ordered, outbox.Link{Queue: tt.queue, Seq: tt.seq}))
		})
	}
	dh, listed := outbox.HeadPolicy(ordered, "c.fifo")
	require.Equal(t, outbox.DeadHeadBlock, dh)
	require.False(t, listed)
	dh, listed = outbox.HeadPolicy(ordered, "b.fifo")
	require.Equal(t, outbox.DeadHeadSkip, dh)
	require.True(t, listed)
	require.True(t, outbox.DeadLetterBlocks(nil, outbox.Link{Queue: "a.fifo", Seq: 1}), "none listed: every ordered row is held to block")
	require.True(t, outbox.DeadLetterBlocks(ordered, outbox.Link{Queue: "b.fifo", Malformed: "prev must be a string, got N"}), "a row whose place cannot be read blocks under skip too")
}
