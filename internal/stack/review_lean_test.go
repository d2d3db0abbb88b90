package stack_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/stack"
)

// TestReviewLean_TheTemplateHasWhatTheLeanDocsName: docs/architecture.md
// and docs/guarantees.md tell operators to turn lean on with the template
// parameter LeanStaging and that MissedRowsAlarm fires on a row the
// stream missed; the template has neither (nor OUTFLOW_LEAN,
// OUTFLOW_BACKSTOP_PAGES, OUTFLOW_BACKSTOP_DRAIN in any function's
// environment). Lean cannot be turned on in a deployed stack, and the one
// signal the docs promise for the stream's misses does not exist.
func TestReviewLean_TheTemplateHasWhatTheLeanDocsName(t *testing.T) {
	t.Parallel()
	tpl, err := stack.Load(templatePath, withExamples(nil))
	require.NoError(t, err)
	cases := []struct {
		name string
		ok   func() bool
	}{
		{"parameter LeanStaging", func() bool { _, ok := tpl.Parameters["LeanStaging"]; return ok }},
		{"resource MissedRowsAlarm", func() bool { _, ok := tpl.Resources["MissedRowsAlarm"]; return ok }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, tc.ok(), "%s is named by the docs but missing from template.yaml", tc.name)
		})
	}
}
