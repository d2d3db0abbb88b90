package handler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/handler"
	"github.com/outflowhq/outflow/internal/outbox"
)

func TestDueInserts_PicksPendingDueInsertsAndSaysWhyNotForTheRest(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(10_000)
	tests := []struct {
		name, record string
		wantKey      string
		wantReason   string
	}{
		{"due insert", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"10000"}}}}`, "a", ""},
		{"modify", `{"eventName":"MODIFY","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"1"}}}}`, "", "not an insert: MODIFY"},
		{"remove", `{"eventName":"REMOVE"}`, "", "not an insert: REMOVE"},
		{"not due", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"10001"},"shard":{"S":"0"}}}}`, "", "not due yet"},
		// A lean row (no shard) due when staged by a producer whose clock
		// is ahead: the engine hands it to the sweep, as no one else would.
		{"not due by this clock, lean", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"created_at":{"N":"10001"},"due_at":{"N":"10001"}}}}`, "a", ""},
		{"claimed", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"claimed"},"due_at":{"N":"1"}}}}`, "", "status is not pending"},
		{"numeric key", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"N":"1"},"status":{"S":"pending"},"due_at":{"N":"1"}}}}`, "", "no string pk in the new image"},
		{"no image", `{"eventName":"INSERT","dynamodb":{}}`, "", "no string pk in the new image"},
		{"status as number", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"N":"1"},"due_at":{"N":"1"}}}}`, "", "status is not pending"},
		{"due as string", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"due_at":{"S":"soon"}}}}`, "", "no numeric due_at in the new image"},
		// Delayed rows are the sweep's (it takes them once due, with no
		// grace): a wake that read the record after the delay ran out would
		// race it for the row (found by the quiet bench).
		{"delayed, now due", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"created_at":{"N":"9000"},"due_at":{"N":"9500"}}}}`, "", "delayed (not_before): the sweep's"},
		{"due at staging", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"created_at":{"N":"9000"},"due_at":{"N":"9000"}}}}`, "a", ""},
		{"created_at unreadable", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"created_at":{"S":"x"},"due_at":{"N":"9500"}}}}`, "a", ""},
		{"due fractional", `{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"1.5"}}}}`, "", "due_at is not an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec events.DynamoDBEventRecord
			require.NoError(t, json.Unmarshal([]byte(tt.record), &rec))
			rec.EventID = "id-1"
			refs, ignored := handler.DueInserts(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}, now)
			if tt.wantKey != "" {
				require.Len(t, refs, 1)
				require.Equal(t, tt.wantKey, refs[0].Key)
				require.Empty(t, ignored)
				return
			}
			require.Empty(t, refs)
			require.Equal(t, []handler.Ignored{{EventID: "id-1", Reason: tt.wantReason}}, ignored)
		})
	}
}

func TestDueInserts_CarriesTheQueueAndTheOrderedPredecessorAndPlaceFromTheImage(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(10_000)
	tests := []struct {
		name, image string
		want        outbox.DueRef
	}{
		{"unordered", `{"pk":{"S":"a"},"queue":{"S":"orders"},"status":{"S":"pending"},"due_at":{"N":"1"}}`,
			outbox.DueRef{Key: "a", Queue: "orders", Linked: true}},
		{"first of its group", `{"pk":{"S":"a"},"queue":{"S":"e.fifo"},"seq":{"N":"1"},"status":{"S":"pending"},"due_at":{"N":"1"}}`,
			outbox.DueRef{Key: "a", Queue: "e.fifo", Linked: true, Seq: 1}},
		{"behind another", `{"pk":{"S":"b"},"queue":{"S":"e.fifo"},"seq":{"N":"2"},"prev":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"1"}}`,
			outbox.DueRef{Key: "b", Queue: "e.fifo", Prev: "a", Linked: true, Seq: 2}},
		// So is a place that is not a whole number.
		{"seq not a number", `{"pk":{"S":"b"},"queue":{"S":"e.fifo"},"seq":{"S":"2"},"prev":{"S":"a"},"status":{"S":"pending"},"due_at":{"N":"1"}}`,
			outbox.DueRef{Key: "b", Queue: "e.fifo"}},
		// A prev of the wrong type is not trusted: the engine reads the row.
		{"prev not a string", `{"pk":{"S":"b"},"queue":{"S":"e.fifo"},"prev":{"N":"7"},"status":{"S":"pending"},"due_at":{"N":"1"}}`,
			outbox.DueRef{Key: "b", Queue: "e.fifo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec events.DynamoDBEventRecord
			require.NoError(t, json.Unmarshal([]byte(`{"eventName":"INSERT","dynamodb":{"NewImage":`+tt.image+`}}`), &rec))
			refs, ignored := handler.DueInserts(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}, now)
			require.Empty(t, ignored)
			require.Equal(t, []outbox.DueRef{tt.want}, refs)
		})
	}
}
