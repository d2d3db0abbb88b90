package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/local"
)

// The local runner schedules the sweep every --sweep-every: the sweep's
// OUTFLOW_SWEEP_RATE must be that schedule, not the template's rate(1
// minute), or a sweep would claim for most of a minute while the runner
// starts the next sweep of its partition (found by review 17b). A period
// within the deadline margin (the default 2 s) cannot be a rate: none is
// set, and the runner's sweeps of a partition run one after another.
func TestStart_TheSweepsRateIsTheLocalSchedule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		every time.Duration
		want  time.Duration
	}{
		{"every 20s", 20 * time.Second, 20 * time.Second},
		{"every 30s", 30 * time.Second, 30 * time.Second},
		{"every 2s, within the margin", 2 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := local.Start(context.Background(), local.Options{Template: template, SweepPartitions: 2, SweepEvery: tt.every})
			require.NoError(t, err)
			defer r.Close()
			env := r.Stack.Env["SweepFunction"]
			rate, err := config.ParseRate(env["OUTFLOW_SWEEP_RATE"])
			require.NoError(t, err)
			require.Equal(t, tt.want, rate, "the sweep claims as if the next sweep came %s after it started (OUTFLOW_SWEEP_RATE=%q); the runner starts it %s after",
				rate, env["OUTFLOW_SWEEP_RATE"], tt.every)
		})
	}
}
