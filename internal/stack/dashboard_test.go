package stack_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// dashboard is the part of a CloudWatch dashboard body the tests read.
type dashboard struct {
	Widgets []struct {
		Type       string
		Properties struct {
			Metrics [][]any
			Alarms  []string
		}
	}
}

func TestTranslation_DashboardPlotsWhatTheStackEmits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		enabled bool
		key     string
	}{{true, ""}, {false, ""}, {true, testKey}, {false, testKey}} {
		enabled := tc.enabled
		tr := translated(t, map[string]string{"DispatcherEnabled": fmt.Sprint(enabled), "KmsKeyArn": tc.key})
		names := tr.OfType("AWS::CloudWatch::Dashboard")
		require.Len(t, names, 1)
		var d struct{ DashboardName, DashboardBody string }
		resourceOf(t, tr, names[0], "AWS::CloudWatch::Dashboard", &d)
		require.Equal(t, stack.StackName+"-"+stack.Region, d.DashboardName, "dashboards are global: scoped to the stack and the region")

		var body dashboard
		require.NoError(t, json.Unmarshal([]byte(d.DashboardBody), &body), d.DashboardBody)
		plotted := map[string]bool{}
		var alarms []string
		for _, w := range body.Widgets {
			alarms = append(alarms, w.Properties.Alarms...)
			for _, row := range w.Properties.Metrics {
				var parts []string
				for _, v := range row {
					if s, ok := v.(string); ok {
						parts = append(parts, s)
					}
				}
				require.GreaterOrEqual(t, len(parts), 2, "%v", row)
				require.NotEqual(t, ".", parts[0], "rows are written out in full, so they can be checked")
				require.Zero(t, len(parts[2:])%2, "%v: dimension name and value pairs", row)
				dims := map[string]string{}
				for i := 2; i < len(parts); i += 2 {
					dims[parts[i]] = parts[i+1]
				}
				requireEmitted(t, "dashboard", parts[0], parts[1], dims)
				plotted[parts[1]+" "+strings.Join(slices.Sorted(maps.Values(dims)), ",")] = true
			}
		}
		for _, want := range []string{
			"OldestDueAgeMs ${OutboxTable}", "Delivered ${OutboxTable}", "Retried ${OutboxTable}", "DeadLettered ${OutboxTable}", "Conflicts ${OutboxTable}", "StrayRows ${OutboxTable}",
			"MissedRows ${OutboxTable}", "HandedOver ${OutboxTable}",
			"OldestBlockedAgeMs ${OutboxTable}", "BlockedGroups ${OutboxTable}", "Waiting ${OutboxTable}",
			"Duration ${SweepFunction}", "Errors ${SweepFunction}", "IteratorAge ${WakeFunction}", "DroppedEventCount ${WakeFunctionStream}",
		} {
			require.True(t, plotted[want], "the dashboard plots %s", want)
		}
		var want []string
		for _, name := range tr.OfType("AWS::CloudWatch::Alarm") {
			want = append(want, "${"+name+".Arn}")
		}
		require.ElementsMatch(t, want, alarms, "the dashboard shows every alarm's state (enabled=%v, key %q)", enabled, tc.key)
	}
}
