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

// reservations are the parameters that reserve a function's concurrency.
var reservations = map[string]string{"SweepReservedConcurrency": "SweepFunction", "WakeReservedConcurrency": "WakeFunction"}

// TestTemplate_ReservesNoConcurrencyUnlessAsked feeds each reservation
// parameter what an operator may type, on the template and on its SAM
// translation: CloudFormation must refuse it, or the function gets no
// reservation (0) or exactly the one asked for. Never a reservation of 0,
// which would stop the function: Ref passes a parameter as typed, so "00"
// would not equal the condition's "0". Nothing above 1000, Lambda's
// default concurrency quota per region: more can never deploy without a
// quota increase, and the minimum Lambda keeps unreserved comes on top.
func TestTemplate_ReservesNoConcurrencyUnlessAsked(t *testing.T) {
	t.Parallel()
	for param, fnName := range reservations {
		p := load(t, nil).Parameters[param]
		require.Equal(t, "String", p.Type, "%s: a Number would pass \"00\" through as typed", param)
		require.Equal(t, "0", p.Default, "%s: no reservation by default", param)
		const refused = "refused"
		for _, tc := range []struct{ value, want string }{
			{"0", ""}, {"1", "1"}, {"2", "2"}, {"999", "999"}, {"1000", "1000"},
			{"00", refused}, {"007", refused}, {"-1", refused}, {"1001", refused}, {"1.5", refused}, {"2.0", refused}, {" 2", refused}, {"", refused},
		} {
			overrides := map[string]string{param: tc.value}
			tpl, errTpl := stack.Load(templatePath, withExamples(overrides))
			tr, errTr := stack.Parse(translatedRaw(t), withExamples(overrides))
			if tc.want == refused {
				require.Error(t, errTpl, "template accepts %s=%q", param, tc.value)
				require.Error(t, errTr, "translation accepts %s=%q", param, tc.value)
				continue
			}
			require.NoError(t, errTpl, "%s=%q", param, tc.value)
			require.NoError(t, errTr, "%s=%q", param, tc.value)
			var fn struct{ ReservedConcurrentExecutions *json.Number }
			resourceOf(t, tr, fnName, "AWS::Lambda::Function", &fn)
			for which, got := range map[string]*json.Number{
				"template":    function(t, tpl, fnName).ReservedConcurrentExecutions,
				"translation": fn.ReservedConcurrentExecutions,
			} {
				if tc.want == "" {
					require.Nil(t, got, "%s, %s=%q: no reservation", which, param, tc.value)
					continue
				}
				require.NotNil(t, got, "%s, %s=%q", which, param, tc.value)
				require.Equal(t, tc.want, got.String(), "%s, %s=%q", which, param, tc.value)
			}
			// The other function keeps no reservation.
			for other := range reservations {
				if other != param {
					require.Nil(t, function(t, tpl, reservations[other]).ReservedConcurrentExecutions, "%s=%q reserves for %s", param, tc.value, reservations[other])
				}
			}
		}
	}
}

// TestTemplate_ReservationAdviceNamesLambdasMinimumUnreserved checks the
// quota advice: Lambda keeps a minimum of the account's concurrency
// unreserved, 100 on most accounts and lower on accounts with a small
// quota (the error names it); not a fixed 10.
func TestTemplate_ReservationAdviceNamesLambdasMinimumUnreserved(t *testing.T) {
	t.Parallel()
	quota := regexp.MustCompile(`(?s)## Concurrency quota\n\n.*?\n\n`).FindString(doc(t, stackDoc))
	require.NotEmpty(t, quota, "%s has a Concurrency quota section", stackDoc)
	fixed10 := regexp.MustCompile(`N \+ 10\b|fewer than 10\b|\b10 must stay unreserved|keep 10 executions`)
	template, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	require.False(t, fixed10.Match(template), "template.yaml: the minimum is not a fixed 10")
	texts := map[string]string{stackDoc: quota}
	configuration := doc(t, configurationDoc)
	for param := range reservations {
		texts[param+" description"] = load(t, nil).Parameters[param].Description
		texts[param+" row"] = docRow(t, configuration, param)
	}
	for what, text := range texts {
		text = strings.Join(strings.Fields(text), " ")
		require.False(t, fixed10.MatchString(text), "%s: the minimum is not a fixed 10: %s", what, text)
		require.Contains(t, text, "100 on most accounts", what)
		require.Contains(t, text, "the error names it", what)
		require.Contains(t, text, "minimum", what)
	}
}
