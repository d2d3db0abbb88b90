package outflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/outbox"
	"github.com/outflowhq/outflow/internal/target"
)

// An EventBridge route carries a row's attributes in the event (source,
// detail-type, detail.outflow.attributes), not as SQS message attributes:
// the deliverer sends any number of them, so the producer, which refuses
// exactly what the deliverer would dead-letter, must not hold a bus row to
// SQS's 8, with source and detail-type counted among them.
func TestPut_ToEventBridge_StagesEveryRowTheDelivererSends(t *testing.T) {
	t.Parallel()
	attrs := func(n int) map[string]string {
		out := map[string]string{"source": "app", "detail-type": "T"}
		for i := range n {
			out[string(rune('a'+i))] = "v"
		}
		return out
	}
	tests := []struct {
		name string
		row  outflow.Row
	}{
		{"source, detail-type and seven attributes", outflow.Row{Key: "eb-9", Queue: "bare", Payload: []byte(`{"id":1}`), Attributes: attrs(7)}},
		{"source, detail-type and twelve attributes", outflow.Row{Key: "eb-14", Queue: "bare", Payload: []byte(`{"id":1}`), Attributes: attrs(12)}},
	}
	p, _ := newRoutedProducer(t, 0)
	bus, err := target.ParseTarget("arn:aws:events:us-east-1:123456789012:event-bus/bus")
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, target.Validate(outbox.Row{Key: tt.row.Key, Payload: tt.row.Payload, Attributes: tt.row.Attributes,
				Attempt: outbox.MaxAttemptsLimit}, bus, 0), "the deliverer sends this row")
			_, err := p.Put(context.Background(), tt.row)
			require.NoError(t, err, "the producer refuses a row the deliverer sends")
		})
	}
}
