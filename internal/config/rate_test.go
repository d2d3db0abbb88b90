package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
)

// A rate too long for a time.Duration is an error, not a
// wrapped-around duration: rate(307445735 minutes) overflows int64
// nanoseconds to 26.29 s, which passes validation (it exceeds the 10 s
// margin) and ends every sweep 26 s in; rate(200000000 minutes) wraps
// negative and is reported as "must exceed OUTFLOW_DEADLINE_MARGIN".
func TestParseRate_RefusesARateThatOverflowsADuration(t *testing.T) {
	t.Parallel()
	tests := []struct{ in string }{
		{"rate(307445735 minutes)"},
		{"rate(200000000 minutes)"},
		{"rate(9223372036854775807 minutes)"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := config.ParseRate(tt.in)
			require.Error(t, err, "parsed as %s", got)
			kv := minimal()
			kv["OUTFLOW_SWEEP_RATE"] = tt.in
			_, err = config.Load(env(kv))
			require.ErrorContains(t, err, "not a rate in minutes")
		})
	}
}

func TestParseRate_ReadsTheTemplatesRateAndDurations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"rate(1 minute)", time.Minute},
		{"rate(5 minutes)", 5 * time.Minute},
		{" rate( 2 minutes ) ", 2 * time.Minute},
		{"90s", 90 * time.Second},
		{"0s", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := config.ParseRate(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
