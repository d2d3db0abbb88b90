package target_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// TestNewMessage_TheDeduplicationIdNamesTheRowAtItsPlace: every send of a
// row shares one deduplication id, so SQS drops a copy; a key staged again
// at another place, of its group or another (SQS deduplicates across a
// queue's groups), gets another, so SQS does not drop it as a copy of the
// first (the consumer closes that place as restaged); a closing message
// has its own; a row with no place keeps its key.
func TestNewMessage_TheDeduplicationIdNamesTheRowAtItsPlace(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 128)
	var dedupIn func(group, key string, seq int64, closed string) string
	dedup := func(key string, seq int64, closed string) string {
		t.Helper()
		return dedupIn("g", key, seq, closed)
	}
	dedupIn = func(group, key string, seq int64, closed string) string {
		t.Helper()
		m, err := target.NewMessage(outbox.Row{Key: key, Group: group, Seq: seq, Closed: closed, Payload: []byte("x")}, true)
		require.NoError(t, err)
		require.True(t, target.ValidID(m.Dedup), "%q is a valid deduplication id", m.Dedup)
		return m.Dedup
	}
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"a row with no place: its key", dedup("k1", 0, ""), "k1", true},
		{"the key at the same place of another group (SQS deduplicates across a queue's groups)", dedup("k1", 1, ""), dedupIn("h", "k1", 1, ""), false},
		{"the key's place closed at the same place of another group", dedup("k1", 1, "purged"), dedupIn("h", "k1", 1, "purged"), false},
		{"a group and key that run into each other", dedupIn("ab", "c", 1, ""), dedupIn("a", "bc", 1, ""), false},
		{"every send of one row at one place", dedup("k1", 2, ""), dedup("k1", 2, ""), true},
		{"the key staged again at the next place", dedup("k1", 2, ""), dedup("k1", 3, ""), false},
		{"a key too long to take its place, at two places", dedup(long, 2, ""), dedup(long, 3, ""), false},
		{"a key too long, sent again", dedup(long, 2, ""), dedup(long, 2, ""), true},
		{"the closing message and its row", dedup("k1", 2, "purged"), dedup("k1", 2, ""), false},
		{"every copy of a closing message", dedup("k1", 2, "purged"), dedup("k1", 2, "dead-letter"), true},
		{"the key's places closed at two places", dedup("k1", 2, "purged"), dedup("k1", 3, "purged"), false},
	} {
		if tc.same {
			require.Equal(t, tc.a, tc.b, tc.name)
		} else {
			require.NotEqual(t, tc.a, tc.b, tc.name)
		}
	}
}
