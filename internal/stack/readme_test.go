package stack_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
)

func TestReadme_LinksTheDashboardAndSaysWhatAReservationNeeds(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	require.Contains(t, text, "`DashboardUrl`")
	require.Contains(t, load(t, nil).Outputs, "DashboardUrl")
	require.Contains(t, text, "unreserved")
}

func TestReadme_DocumentsEveryVariableParameterAndAlarm(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	for _, v := range config.Vars {
		require.Contains(t, text, "| `"+v.Name+"` |", "README config table lists %s", v.Name)
	}
	tpl := load(t, nil)
	for name := range tpl.Parameters {
		require.Contains(t, text, "| `"+name+"` |", "README explains parameter %s", name)
	}
	for _, name := range tpl.OfType("AWS::CloudWatch::Alarm") {
		require.Contains(t, text, "| `"+name+"` |", "README explains alarm %s", name)
	}
}
