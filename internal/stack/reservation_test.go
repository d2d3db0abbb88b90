package stack_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTemplate_SweepReservesNoConcurrencyUnlessAsked(t *testing.T) {
	t.Parallel()
	p := load(t, nil).Parameters["SweepReservedConcurrency"]
	require.Equal(t, 0.0, p.Default)
	require.Contains(t, p.Description, "quota", "the parameter says what quota a reservation needs")
	for _, tc := range []struct {
		value string
		want  *int
	}{{"0", nil}, {"2", ptr(2)}} {
		overrides := map[string]string{"SweepReservedConcurrency": tc.value}
		require.Equal(t, tc.want, function(t, load(t, overrides), "SweepFunction").ReservedConcurrentExecutions, "template, %s", tc.value)
		var fn struct{ ReservedConcurrentExecutions *int }
		resourceOf(t, translated(t, overrides), "SweepFunction", "AWS::Lambda::Function", &fn)
		require.Equal(t, tc.want, fn.ReservedConcurrentExecutions, "translation, %s", tc.value)
	}
}

func ptr[T any](v T) *T { return &v }
