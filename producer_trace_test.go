package outflow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/outflowhq/outflow"
)

// The trace context is context, not content: a row that is valid without
// it is staged under a traced context too, the trace left out when the
// row has no room for it (docs/targets.md, "Trace context").
func TestPut_StagesUnderATraceEveryRowValidWithoutOne(t *testing.T) {
	t.Parallel()
	span := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x57, 0x59, 0xe9, 0x88, 0xbd, 0x86, 0x2e, 0x3f, 0xe1, 0xbe, 0x46, 0xa9, 0x94, 0x27, 0x27, 0x93},
		SpanID:  trace.SpanID{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8}, TraceFlags: trace.FlagsSampled,
	})
	traced := trace.ContextWithSpanContext(context.Background(), span)
	seven := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		seven[k] = "v"
	}
	// fits is the longest text payload for "orders" that Validate takes
	// without a trace context, at the default 256 KiB.
	fits := func() []byte {
		for n := 256 * 1024; n > 0; n-- {
			r := outflow.Row{Key: "k-fits", Queue: "orders", Payload: []byte(strings.Repeat("x", n))}
			if r.Validate(0) == nil {
				return r.Payload
			}
		}
		t.Fatal("no payload fits")
		return nil
	}()
	tests := []struct {
		name string
		row  outflow.Row
	}{
		{"a binary payload with seven attributes", outflow.Row{Key: "k-binary", Queue: "orders",
			Payload: []byte{0xff, 0x00, 0x01}, Attributes: seven}},
		{"a binary payload with seven attributes to a topic", outflow.Row{Key: "k-binary-sns", Queue: "notices",
			Payload: []byte{0xff, 0x00, 0x01}, Attributes: seven}},
		{"a payload that fits only without the trace", outflow.Row{Key: "k-fits", Queue: "orders", Payload: fits}},
	}
	p, store := newRoutedProducer(t, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, tt.row.Validate(0), "the row is valid as given")
			_, err := p.Put(traced, tt.row)
			require.NoError(t, err, "a trace in the context made a valid row be refused")
			got, err := store.Get(context.Background(), tt.row.Key)
			require.NoError(t, err)
			require.NotNil(t, got)
		})
	}
}
