package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// TestRow_MarksAnAttemptOutcomeUnknownOnlyWhereTheDispatcherCouldNotTell:
// a row's error history calls an attempt's outcome unknown only where the
// dispatcher recorded it so (outbox.Definite). A send to a queue that does
// not exist (AWS.SimpleQueueService.NonExistentQueue) was refused: the
// message was not sent, as surely as a row with no route.
func TestRow_MarksAnAttemptOutcomeUnknownOnlyWhereTheDispatcherCouldNotTell(t *testing.T) {
	t.Parallel()
	e := &env{table: awstest.NewTable(t)}
	e.vars = map[string]string{
		"OUTFLOW_TABLE":        e.table,
		"AWS_ENDPOINT_URL":     awstest.Endpoint(),
		"AWS_REGION":           "us-east-1",
		"OUTFLOW_ROUTES":       "audit=" + awstest.Endpoint() + "/000000000000/outflow-missing-queue",
		"OUTFLOW_MAX_ATTEMPTS": "1",
	}
	var err error
	e.op, err = dynamo.NewOperator(awstest.DynamoDB(t), dynamo.Config{Table: e.table, Shards: 4})
	require.NoError(t, err)
	p, err := outflow.NewProducer(awstest.DynamoDB(t), outflow.Config{Table: e.table, Shards: 4, Ordered: []string{}})
	require.NoError(t, err)
	_, err = p.Put(context.Background(),
		outflow.Row{Key: "missing-queue", Queue: "audit", Payload: []byte(`{}`)},
		outflow.Row{Key: "no-route", Queue: "ghost", Payload: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, 2, e.sweep(t).DeadLettered)
	c := e.serve(t, nil)

	// An attempt the dispatcher could not tell about, as it stores one.
	unsure := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	row := deadRow("timed-out", "audit", unsure, []byte(`{}`))
	row.UnsureAt, row.Errors[0].Unsure = unsure, true
	(&rig{table: e.table, api: &counting{Client: awstest.DynamoDB(t)}}).put(t, row, nil)

	for _, tt := range []struct {
		name, key, says string
		unknown         bool
	}{
		{"a queue that does not exist refused it", "missing-queue", "NonExistentQueue", false},
		{"a row with no route was never sent", "no-route", "no route for queue", false},
		{"a send whose answer never came may have landed", "timed-out", "boom timed-out", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body, _ := do(t, "GET", c.url+"/row?key="+tt.key, "", nil, nil)
			require.Equal(t, http.StatusOK, status, body)
			require.Contains(t, body, tt.says)
			require.Equal(t, tt.unknown, strings.Contains(body, "(outcome unknown)"), body)
		})
	}
}
