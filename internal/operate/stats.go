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
	if !st.OldestDue.IsZero() {
		r.OldestDueAgeMs = now.Sub(st.OldestDue).Milliseconds()
	}
	if !st.OldestBlocked.IsZero() {
		r.OldestBlockedAgeMs = max(0, now.Sub(st.OldestBlocked).Milliseconds())
	}
	return r, nil
}
