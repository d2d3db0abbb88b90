package stack_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// TestTemplate_SweepReservesNoConcurrencyUnlessAsked feeds the reservation
// parameter what an operator may type, on the template and on its SAM
// translation: CloudFormation must refuse it, or the sweep gets no
// reservation (0) or exactly the one asked for. Never a reservation of 0,
// which would stop the sweep: Ref passes a parameter as typed, so "00"
// would not equal the condition's "0".
func TestTemplate_SweepReservesNoConcurrencyUnlessAsked(t *testing.T) {
	t.Parallel()
	p := load(t, nil).Parameters["SweepReservedConcurrency"]
	require.Equal(t, "0", p.Default, "no reservation by default")
	const refused = "refused"
	for _, tc := range []struct{ value, want string }{
		{"0", ""}, {"1", "1"}, {"2", "2"}, {"999", "999"}, {"1000", "1000"},
		{"00", refused}, {"007", refused}, {"-1", refused}, {"1001", refused}, {"1.5", refused}, {"2.0", refused}, {" 2", refused}, {"", refused},
	} {
		overrides := map[string]string{"SweepReservedConcurrency": tc.value}
		tpl, errTpl := stack.Load(templatePath, overrides)
		tr, errTr := stack.Parse(translatedRaw(t), overrides)
		if tc.want == refused {
			require.Error(t, errTpl, "template accepts %q", tc.value)
			require.Error(t, errTr, "translation accepts %q", tc.value)
			continue
		}
		require.NoError(t, errTpl, tc.value)
		require.NoError(t, errTr, tc.value)
		var fn struct{ ReservedConcurrentExecutions *json.Number }
		resourceOf(t, tr, "SweepFunction", "AWS::Lambda::Function", &fn)
		for which, got := range map[string]*json.Number{
			"template":    function(t, tpl, "SweepFunction").ReservedConcurrentExecutions,
			"translation": fn.ReservedConcurrentExecutions,
		} {
			if tc.want == "" {
				require.Nil(t, got, "%s, %q: no reservation", which, tc.value)
				continue
			}
			require.NotNil(t, got, "%s, %q", which, tc.value)
			require.Equal(t, tc.want, got.String(), "%s, %q", which, tc.value)
		}
	}
}

// TestTemplate_ReservationAdviceNamesLambdasMinimumUnreserved checks the
// quota advice: Lambda keeps a minimum of the account's concurrency
// unreserved, 100 on most accounts and lower on accounts with a small
// quota (the error names it); not a fixed 10.
func TestTemplate_ReservationAdviceNamesLambdasMinimumUnreserved(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `SweepReservedConcurrency` \\|.*$").FindString(string(readme))
	require.NotEmpty(t, row, "README has a row for SweepReservedConcurrency")
	deploy := regexp.MustCompile(`(?s)\*\*Concurrency quota\.\*\*.*?\n\n`).FindString(string(readme))
	require.NotEmpty(t, deploy, "README's Deploy section has a Concurrency quota paragraph")
	fixed10 := regexp.MustCompile(`N \+ 10\b|fewer than 10\b|\b10 must stay unreserved|keep 10 executions`)
	template, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	require.False(t, fixed10.Match(template), "template.yaml: the minimum is not a fixed 10")
	for what, text := range map[string]string{
		"parameter description": load(t, nil).Parameters["SweepReservedConcurrency"].Description,
		"README Deploy":         deploy,
		"README parameter row":  row,
	} {
		text = strings.Join(strings.Fields(text), " ")
		require.False(t, fixed10.MatchString(text), "%s: the minimum is not a fixed 10: %s", what, text)
		require.Contains(t, text, "100 on most accounts", what)
		require.Contains(t, text, "the error names it", what)
		require.Contains(t, text, "minimum", what)
	}
}
