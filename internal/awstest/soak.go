package awstest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// EnvInt is the positive whole number the variable name holds, else def:
// how the soaks read their size and seed.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// DueKeys returns the keys of every row the store's due index holds as
// due at now, shard by shard, every page: what a soak reads to know
// whether anything is left to deliver.
func DueKeys(t testing.TB, s *dynamo.Store, now time.Time) []string {
	t.Helper()
	var keys []string
	for shard := range s.Shards() {
		var after *outbox.DueRef
		for {
			refs, more, err := s.QueryDue(context.Background(), shard, now, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range refs {
				keys = append(keys, r.Key)
			}
			if !more || len(refs) == 0 {
				break
			}
			after = &refs[len(refs)-1]
		}
	}
	return keys
}

// SettledDone reports whether row, as a store's Get returned it, was
// settled as delivered: deleted, or kept as done (the dispatcher keeps
// delivered rows as done for OUTFLOW_DONE_RETENTION, 24 h by default).
func SettledDone(row *outbox.Row) bool {
	return row == nil || row.Status == outbox.StatusDone
}
