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

func TestDueInserts_CarriesTheRowsImageForTheClaimFreePath(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(10_000)
	tests := []struct {
		name, image string
		want        *outbox.Row
	}{
		{"a staged row", `{"pk":{"S":"a"},"queue":{"S":"orders"},"payload":{"S":"{\"n\":1}"},"attributes":{"M":{"kind":{"S":"x"}}},
			"status":{"S":"pending"},"attempt":{"N":"0"},"created_at":{"N":"9000"},"due_at":{"N":"9000"},"shard":{"S":"0"},"stage_id":{"S":"ABCDEFGHIJKLMNOP"}}`,
			&outbox.Row{Key: "a", Queue: "orders", Payload: []byte(`{"n":1}`), Attributes: map[string]string{"kind": "x"},
				Status: outbox.StatusPending, CreatedAt: time.UnixMilli(9000), DueAt: time.UnixMilli(9000), StageID: "ABCDEFGHIJKLMNOP"}},
		{"a binary payload, staged lean (no shard)", `{"pk":{"S":"a"},"queue":{"S":"orders"},"payload":{"B":"AP8="},
			"status":{"S":"pending"},"attempt":{"N":"0"},"created_at":{"N":"9000"},"due_at":{"N":"9000"}}`,
			&outbox.Row{Key: "a", Queue: "orders", Payload: []byte{0x00, 0xff},
				Status: outbox.StatusPending, CreatedAt: time.UnixMilli(9000), DueAt: time.UnixMilli(9000), Unindexed: true}},
		// Not a readable row: no image, so the wake claims it and the
		// claim dead-letters it with the reason.
		{"no queue", `{"pk":{"S":"a"},"payload":{"S":"x"},"status":{"S":"pending"},"attempt":{"N":"0"},"due_at":{"N":"9000"}}`, nil},
		{"attributes not a map", `{"pk":{"S":"a"},"queue":{"S":"orders"},"attributes":{"L":[{"S":"x"}]},"status":{"S":"pending"},"attempt":{"N":"0"},"due_at":{"N":"9000"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec events.DynamoDBEventRecord
			require.NoError(t, json.Unmarshal([]byte(`{"eventName":"INSERT","dynamodb":{"NewImage":`+tt.image+`}}`), &rec))
			refs, _ := handler.DueInserts(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}, now)
			require.Len(t, refs, 1)
			if tt.want == nil {
				require.Nil(t, refs[0].Image)
				return
			}
			require.NotNil(t, refs[0].Image)
			require.Equal(t, *tt.want, *refs[0].Image)
		})
	}
}
