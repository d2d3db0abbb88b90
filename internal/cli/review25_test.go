package cli_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReview25_StatsCountsTheDeadLettersOfARouteTheDispatcherDropped:
// before the published configuration, outflow stats run without routes
// tallied a scan of the dead index, so it counted every dead letter. Now
// it takes the published routes as the dead queues to count, and so, by
// default, it leaves out exactly the dead letters a missing route makes
// ("no route for queue ..."), the ones UnroutedRowsAlarm sends the
// operator to find: total.failed says 0 while two rows are dead.
func TestReview25_StatsCountsTheDeadLettersOfARouteTheDispatcherDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deadLetters(t, "ghost", 2) // no route for queue "ghost", budget spent
	e.publish(t, nil)            // the dispatcher routes orders and events.fifo
	delete(e.vars, "OUTFLOW_ROUTES")

	var st struct {
		Total struct {
			Failed int `json:"failed"`
		} `json:"total"`
		DeadCounted string `json:"dead_counted"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "stats", "--output", "json")), &st))
	require.Equal(t, 2, st.Total.Failed, "the two dead letters of the dropped route are not counted (dead_counted %q)", st.DeadCounted)
}
