package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpliceSection_ReplacesOrInsertsTheTargetsSection checks how `-only
// targets` brings its section into an existing benchmarks.md: in place of
// the old one, else before the cost section, else at the end.
func TestSpliceSection_ReplacesOrInsertsTheTargetsSection(t *testing.T) {
	t.Parallel()
	const sec = targetsHeading + "\nnew figures\n\n"
	tests := []struct {
		name, doc, want string
	}{
		{"replaces the old section", "# B\n\n" + targetsHeading + "\nold figures\n\n## Cost per million messages\n\nc\n",
			"# B\n\n" + sec + "## Cost per million messages\n\nc\n"},
		{"replaces the last section", "# B\n\n" + targetsHeading + "\nold figures\n", "# B\n\n" + sec},
		{"inserts before the cost section", "# B\n\n## Moto\n\nm\n\n## Cost per million messages\n\nc\n",
			"# B\n\n## Moto\n\nm\n\n" + sec + "## Cost per million messages\n\nc\n"},
		{"appends when neither is there", "# B\n\n## Moto\n\nm\n", "# B\n\n## Moto\n\nm\n\n" + sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, spliceSection(tt.doc, targetsHeading, sec, "## Cost per million messages\n"))
		})
	}
}
