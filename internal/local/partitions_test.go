package local_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/local"
)

// TestDemo_TwoSweepPartitionsDeliverItAllAndBothSweep runs the demo with
// SweepPartitions = 2, in process and as the built bootstraps under the
// emulator (where the scheduled sweep's Lambda client invokes the runner's
// Invoke endpoint): everything arrives or dead-letters as staged, ordered
// groups in order, and both partitions' sweeps report, named.
func TestDemo_TwoSweepPartitionsDeliverItAllAndBothSweep(t *testing.T) {
	t.Parallel()
	for _, rie := range []bool{false, true} {
		t.Run(fmt.Sprintf("rie=%v", rie), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			opts := local.Options{Template: template, SweepPartitions: 2, RIE: rie}
			if rie {
				opts.Bootstraps = buildBootstraps(t)
			}
			opts, demo := local.NewDemo(opts)
			r, err := local.Start(ctx, opts)
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, 2, r.Partitions)
			env := r.Stack.Env["SweepFunction"]
			require.Equal(t, "2", env["OUTFLOW_SWEEP_PARTITIONS"])
			require.Equal(t, "4", env["OUTFLOW_SHARDS"], "the template's 4 shards hold 2 partitions")
			if rie {
				require.Len(t, r.Pids(), 4, "moto, the wake, the sweep and one sweep instance for partition 1")
			}
			rep := runDemo(t, r, demo)

			require.True(t, rep.OK(), "problems: %v", rep.Problems)
			require.Equal(t, 50, rep.Staged)
			require.Equal(t, 48, rep.Delivered)
			require.Equal(t, 2, rep.DeadLettered)
			// The topic and the bus, through the functions as they run here
			// (in process, or the bootstraps' own SDK clients under RIE).
			require.Len(t, rep.Subscribers, 2)
			for _, s := range rep.Subscribers {
				require.Equal(t, 1, s.Delivered, "%s (%s)", s.Route, s.Kind)
				require.Equal(t, 1, s.TraceParents, "%s (%s)", s.Route, s.Kind)
			}
			require.Equal(t, 3, rep.OrderedGroups)
			require.Positive(t, rep.Sweeps["0/2"], "partition 0 swept: %v", rep.Sweeps)
			require.Positive(t, rep.Sweeps["1/2"], "partition 1 swept: %v", rep.Sweeps)
			require.Len(t, rep.Sweeps, 2, "every sweep names its partition: %v", rep.Sweeps)
		})
	}
}

// TestStart_SweepPartitionsAndShards: --sweep-partitions raises Shards to
// match when the parameters leave it at the template's lower default; with
// Shards set below it, the sweep's init fails, saying which two variables
// disagree and what to do.
func TestStart_SweepPartitionsAndShards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		partitions int
		params     map[string]string
		shards     string
		err        string
		rie        bool
	}{
		{name: "raised", partitions: 6, shards: "6"},
		{name: "kept above", partitions: 2, params: map[string]string{"Shards": "8"}, shards: "8"},
		{name: "set below", partitions: 5, params: map[string]string{"Shards": "4"},
			err: "OUTFLOW_SWEEP_PARTITIONS=5: must be in [1, OUTFLOW_SHARDS=4]: each partition sweeps shards of its own (raise OUTFLOW_SHARDS, producers too, or lower the partitions)"},
		{name: "parameter below", params: map[string]string{"SweepPartitions": "5", "Shards": "4"}, err: "OUTFLOW_SWEEP_PARTITIONS=5"},
		// The emulator would init the bootstrap at the first invoke; Start
		// checks first (no bootstrap is needed to fail).
		{name: "set below, emulated", rie: true, partitions: 5, params: map[string]string{"Shards": "4"}, err: "OUTFLOW_SWEEP_PARTITIONS=5: must be in [1, OUTFLOW_SHARDS=4]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := local.Start(context.Background(), local.Options{Template: template, SweepPartitions: tc.partitions, Params: tc.params,
				RIE: tc.rie, Bootstraps: t.TempDir()})
			if tc.err != "" {
				require.ErrorContains(t, err, "SweepFunction: invalid configuration: ")
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, tc.partitions, r.Partitions)
			require.Equal(t, tc.shards, r.Stack.Env["SweepFunction"]["OUTFLOW_SHARDS"])
			require.Equal(t, tc.shards, r.Stack.Env["WakeFunction"]["OUTFLOW_SHARDS"], "both functions, and so the producers, use the same shards")
			require.Equal(t, fmt.Sprint(tc.partitions), r.Stack.Env["SweepFunction"]["OUTFLOW_SWEEP_PARTITIONS"])
		})
	}
}
