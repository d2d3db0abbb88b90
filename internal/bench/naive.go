package bench

import (
	"context"
	"errors"
	"time"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Naive is the baseline dispatcher a first implementation would write: it
// walks the due index and claims, sends and settles one row at a time. It
// returns how many rows it delivered.
func Naive(ctx context.Context, store outbox.Store, d outbox.Deliverer, now func() time.Time, lease time.Duration, maxAttempts, pageSize int) (int, error) {
	delivered := 0
	for shard := range store.Shards() {
		var after *outbox.DueRef
		for {
			refs, more, err := store.QueryDue(ctx, shard, now(), after, pageSize)
			if err != nil {
				return delivered, err
			}
			for _, ref := range refs {
				row, err := store.Claim(ctx, ref.Key, now(), lease, maxAttempts)
				var conflict *outbox.ConflictError
				if errors.As(err, &conflict) {
					continue
				}
				if err != nil {
					return delivered, err
				}
				if err := d.Deliver(ctx, row.Queue, []outbox.Row{row})[0]; err != nil {
					continue
				}
				if err := store.Done(ctx, row, now()); err != nil {
					return delivered, err
				}
				delivered++
			}
			if !more || len(refs) == 0 {
				break
			}
			after = &refs[len(refs)-1]
		}
	}
	return delivered, nil
}
