package operate

import (
	"context"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

// StatsQuery is what Stats counts.
type StatsQuery struct {
	// Exact reads every due row's status and every dead letter
	// (dynamo.Operator.Stats); otherwise Stats makes count queries only
	// (dynamo.Operator.Count) with DeadQueues and Cap.
	Exact bool
	// Blocked also counts the blocked ordered groups, reading every dead
	// letter of a FIFO route.
	Blocked    bool
	DeadQueues []string
	Cap        int
}

// Report is the backlog with the ages of its oldest due row and of its
// oldest blocked head, as outflow stats prints it.
type Report struct {
	*dynamo.Stats
	OldestDueAgeMs     int64 `json:"oldest_due_age_ms"`
	OldestBlockedAgeMs int64 `json:"oldest_blocked_age_ms"`
	// DeadOutcomes counts the dead letters by outcome (OutcomeOf): those
	// no message closed apart from those whose place a closing message
	// closed, and from purged ones whose closing message failed, which
	// the failed counts hold alike. Counted with Exact only (nil
	// otherwise): it reads every dead letter, and the closed of those of
	// FIFO routes from the table.
	DeadOutcomes map[string]int `json:"dead_outcomes,omitempty"`
}

// Blocks says whether a dead letter holds its ordered group under the
// dispatcher's ordered routes and their dead-head policies.
func Blocks(ordered map[string]outbox.DeadHead) func(dynamo.DeadRef) bool {
	return func(d dynamo.DeadRef) bool { return outbox.DeadLetterBlocks(ordered, d.Link()) }
}

// Stats counts the backlog as q says, at now.
func Stats(ctx context.Context, op *dynamo.Operator, now time.Time, q StatsQuery, ordered map[string]outbox.DeadHead) (Report, error) {
	var st *dynamo.Stats
	var err error
	if q.Exact {
		st, err = op.Stats(ctx, now, Blocks(ordered))
	} else {
		st, err = op.Count(ctx, now, dynamo.CountQuery{DeadQueues: q.DeadQueues, Cap: q.Cap})
		if err == nil && q.Blocked {
			err = op.CountBlocked(ctx, Blocks(ordered), st)
		}
	}
	if err != nil {
		return Report{}, err
	}
	r := Report{Stats: st}
	if q.Exact {
		if r.DeadOutcomes, err = deadOutcomes(ctx, op); err != nil {
			return Report{}, err
		}
	}
	if !st.OldestDue.IsZero() {
		r.OldestDueAgeMs = now.Sub(st.OldestDue).Milliseconds()
	}
	if !st.OldestBlocked.IsZero() {
		r.OldestBlockedAgeMs = max(0, now.Sub(st.OldestBlocked).Milliseconds())
	}
	return r, nil
}

// deadOutcomes tallies every dead letter by outcome: each entry of the
// dead index is failed, and only a dead letter of a FIFO route can have a
// place, so only those have a closed to read (WithGroups, which leaves
// out those no longer failed).
func deadOutcomes(ctx context.Context, op *dynamo.Operator) (map[string]int, error) {
	out := map[string]int{}
	var fifo []dynamo.DeadRef
	err := op.EachDead(ctx, dynamo.DeadQuery{}, func(d dynamo.DeadRef) error {
		if outbox.FIFORoute(d.Queue) {
			fifo = append(fifo, d)
		} else {
			out[ListedOutcome("", d.Attempt).Name]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	fifo, err = op.WithGroups(ctx, fifo)
	if err != nil {
		return nil, err
	}
	for _, d := range fifo {
		out[ListedOutcome(d.Closed, d.Attempt).Name]++
	}
	return out, nil
}
