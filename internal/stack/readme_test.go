package stack_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// docsText is README.md and every page of docs/ together: a table row
// may live in either (docs/deploy.md explains the deploy parameters).
func docsText(t *testing.T) string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	var b strings.Builder
	for _, p := range append([]string{"../../README.md"}, paths...) {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		b.Write(raw)
		b.WriteString("\n")
	}
	return b.String()
}

func TestReadme_DocumentsEveryVariableParameterAndAlarm(t *testing.T) {
	t.Parallel()
	text := docsText(t)
	for _, v := range config.Vars {
		require.Contains(t, text, "| `"+v.Name+"` |", "README config table lists %s", v.Name)
	}
	tpl := load(t, nil)
	for name := range tpl.Parameters {
		require.Contains(t, text, "| `"+name+"` |", "README explains parameter %s", name)
	}
	// Some alarms exist only under a condition: the bus's dead-letter
	// alarm only with a customer key.
	for _, key := range []string{"", testKey} {
		for _, name := range load(t, map[string]string{"KmsKeyArn": key}).OfType("AWS::CloudWatch::Alarm") {
			require.Contains(t, text, "| `"+name+"` |", "README explains alarm %s", name)
		}
	}
}

// readmeRow is the README's table row for a parameter.
func readmeRow(t *testing.T, readme, name string) string {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\|.*$").FindString(readme)
	require.NotEmpty(t, row, "README has a row for %s", name)
	return row
}

// TestDocs_SayWhatTheTemplateCannotCheck holds the docs to what the
// template does and to the limits it cannot enforce itself.
func TestDocs_SayWhatTheTemplateCannotCheck(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	arch, err := os.ReadFile("../../docs/architecture.md")
	require.NoError(t, err)
	tpl := load(t, nil)
	for _, tc := range []struct{ what, text, want string }{
		// Lambda drops lines below the level, so the metrics line takes it.
		{"LogLevel row", readmeRow(t, readme, "LogLevel"), `"level":"ERROR"`},
		{"README logging", readme, "every metrics line reads `\"level\":\"ERROR\"`"},
		// CloudFormation cannot compare the threshold with the drop age.
		{"IteratorAgeAlarmThresholdMs row", readmeRow(t, readme, "IteratorAgeAlarmThresholdMs"), "Must stay below `WakeMaxRecordAgeSeconds` × 1000"},
		{"IteratorAgeAlarmThresholdMs description", tpl.Parameters["IteratorAgeAlarmThresholdMs"].Description, "Must stay below WakeMaxRecordAgeSeconds x 1000"},
		{"SweepRate row", readmeRow(t, readme, "SweepRate"), "`rate(1 minute)` to `rate(5 minutes)`"},
		{"architecture, sweep", string(arch), "no reserved concurrency by default"},
	} {
		oneLine := strings.Join(strings.Fields(tc.text), " ")
		require.Contains(t, oneLine, tc.want, tc.what)
	}
	require.NotContains(t, string(arch), "reserved concurrency 1", "the sweep reserves none by default")
}
