package target_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/outflowhq/outflow/internal/target"
)

// traceParent is a valid W3C traceparent.
const traceParent = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"

func TestValidTraceParent_AcceptsW3CsFormOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{traceParent, true},
		{"01-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01-future", true},
		{"00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01-extra", false},
		{"ff-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01", false},
		{"00-00000000000000000000000000000000-53995c3f42cd8ad8-01", false},
		{"00-5759e988bd862e3fe1be46a994272793-0000000000000000-01", false},
		{"00-5759E988BD862E3FE1BE46A994272793-53995c3f42cd8ad8-01", false},
		{"00-5759e988bd862e3fe1be46a99427279-53995c3f42cd8ad8-01", false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793", false},
		{"", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.ok, target.ValidTraceParent(tt.in) == nil, tt.in)
	}
}

func TestTraceParentFromXRay_ReadsLambdasHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header, want string
	}{
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", traceParent},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0;Lineage=a87bd80c:1|68fd508a:5", "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00"},
		{"Parent=53995c3f42cd8ad8; Root=1-5759e988-bd862e3fe1be46a994272793", "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00"},
		{"Root=1-5759e988-bd862e3fe1be46a994272793", ""}, // no parent: nothing to continue from
		{"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", ""},
		{"garbage", ""},
	}
	for _, tt := range tests {
		got, ok := target.TraceParentFromXRay(tt.header)
		require.Equal(t, tt.want, got, tt.header)
		require.Equal(t, tt.want != "", ok, tt.header)
	}
}

// Every traceparent survives a trip through X-Ray's form, but for flags
// other than sampled, which X-Ray does not carry.
func TestXRayHeader_RoundTripsEveryTraceParent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		hex := func(n int) string {
			b := rapid.SliceOfN(rapid.Byte(), n, n).Draw(t, "bytes")
			return fmt.Sprintf("%x", b)
		}
		trace, parent, sampled := hex(16), hex(8), rapid.Bool().Draw(t, "sampled")
		flags := "00"
		if sampled {
			flags = "01"
		}
		tp := "00-" + trace + "-" + parent + "-" + flags
		if target.ValidTraceParent(tp) != nil {
			t.Skip("all-zero ids are invalid")
		}
		h, ok := target.XRayHeader(tp)
		require.True(t, ok)
		back, ok := target.TraceParentFromXRay(h)
		require.True(t, ok)
		require.Equal(t, tp, back)
	})
}
