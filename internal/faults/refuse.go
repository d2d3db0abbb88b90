package faults

import (
	"context"

	"github.com/outflowhq/outflow/internal/outbox"
)

// Refuse is a deliverer that fails, without sending them, the rows Fail
// picks (a nil error passes a row), and hands the rest to Next in one
// call: a target refusing some messages of a batch, as SQS does one
// entry at a time.
type Refuse struct {
	Next outbox.Deliverer
	Fail func(outbox.Row) error
}

// Deliver implements outbox.Deliverer.
func (r Refuse) Deliver(ctx context.Context, queue string, rows []outbox.Row) []error {
	errs := make([]error, len(rows))
	var pass []outbox.Row
	var at []int
	for i, row := range rows {
		if err := r.Fail(row); err != nil {
			errs[i] = err
			continue
		}
		pass, at = append(pass, row), append(at, i)
	}
	if len(pass) > 0 {
		for j, err := range r.Next.Deliver(ctx, queue, pass) {
			errs[at[j]] = err
		}
	}
	return errs
}
