package stack_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTemplate_ParametersAreBounded(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	for name, p := range tpl.Parameters {
		if p.Type != "Number" {
			continue
		}
		def, err := strconv.ParseFloat(fmt.Sprint(p.Default), 64)
		require.NoError(t, err, name)
		if len(p.AllowedValues) > 0 {
			require.Contains(t, p.AllowedValues, p.Default, name)
			continue
		}
		require.NotNil(t, p.MinValue, "%s has no MinValue", name)
		require.NotNil(t, p.MaxValue, "%s has no MaxValue", name)
		require.LessOrEqual(t, *p.MinValue, def, name)
		require.LessOrEqual(t, def, *p.MaxValue, name)
	}
	for _, name := range []string{"SweepMemoryMB", "WakeMemoryMB"} {
		require.Equal(t, 128.0, *tpl.Parameters[name].MinValue, name)
		require.Equal(t, 10240.0, *tpl.Parameters[name].MaxValue, name)
	}
	for _, name := range []string{"SweepTimeoutSeconds", "WakeTimeoutSeconds"} {
		require.GreaterOrEqual(t, *tpl.Parameters[name].MinValue, 1.0, name)
		require.LessOrEqual(t, *tpl.Parameters[name].MaxValue, 900.0, "%s: Lambda's limit", name)
	}
	// The values CloudWatch Logs accepts for RetentionInDays.
	retention := []any{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
	var got []float64
	for _, v := range tpl.Parameters["LogRetentionDays"].AllowedValues {
		got = append(got, v.(float64))
	}
	var want []float64
	for _, v := range retention {
		want = append(want, float64(v.(int)))
	}
	require.Equal(t, want, got)
	require.NotEmpty(t, tpl.Parameters["Jitter"].AllowedPattern, "Jitter is a number in a string")
}
