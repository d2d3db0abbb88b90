package stack_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
)

// The documentation these tests hold to the template, from the repository.
const (
	configurationDoc = "docs/configuration.md" // every variable and parameter
	operatingDoc     = "docs/operating.md"     // alarms, dashboard, logs
	stackDoc         = "docs/stack.md"         // what the stack creates, quota, keys
)

// doc returns a file of the repository's documentation, by its path from
// the repository's root.
func doc(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile("../../" + path)
	require.NoError(t, err)
	return string(raw)
}

func TestDocs_LinkTheDashboardAndSayWhatAReservationNeeds(t *testing.T) {
	t.Parallel()
	require.Contains(t, doc(t, operatingDoc), "`DashboardUrl`")
	require.Contains(t, load(t, nil).Outputs, "DashboardUrl")
	require.Contains(t, doc(t, stackDoc), "unreserved")
}

func TestDocs_DocumentEveryVariableParameterAndAlarm(t *testing.T) {
	t.Parallel()
	configuration := doc(t, configurationDoc)
	for _, v := range config.Vars {
		require.Contains(t, configuration, "| `"+v.Name+"` |", "%s lists variable %s", configurationDoc, v.Name)
	}
	tpl := load(t, nil)
	for name := range tpl.Parameters {
		require.Contains(t, configuration, "| `"+name+"` |", "%s explains parameter %s", configurationDoc, name)
	}
	// Some alarms exist only under a condition: the bus's dead-letter
	// alarm only with a customer key.
	operating := doc(t, operatingDoc)
	for _, key := range []string{"", testKey} {
		for _, name := range load(t, map[string]string{"KmsKeyArn": key}).OfType("AWS::CloudWatch::Alarm") {
			require.Contains(t, operating, "| `"+name+"` |", "%s explains alarm %s", operatingDoc, name)
		}
	}
}

// docRow is the row of a Markdown table in text for a parameter.
func docRow(t *testing.T, text, name string) string {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\|.*$").FindString(text)
	require.NotEmpty(t, row, "a table row for %s", name)
	return row
}

// TestDocs_SayWhatTheTemplateCannotCheck holds the docs to what the
// template does and to the limits it cannot enforce itself.
func TestDocs_SayWhatTheTemplateCannotCheck(t *testing.T) {
	t.Parallel()
	configuration, operating := doc(t, configurationDoc), doc(t, operatingDoc)
	arch := doc(t, "docs/architecture.md")
	tpl := load(t, nil)
	for _, tc := range []struct{ what, text, want string }{
		// Lambda drops lines below the level, so the metrics line takes it.
		{"LogLevel row", docRow(t, configuration, "LogLevel"), `"level":"ERROR"`},
		{"logging", operating, "every metrics line reads `\"level\":\"ERROR\"`"},
		// CloudFormation cannot compare the threshold with the drop age.
		{"IteratorAgeAlarmThresholdMs row", docRow(t, configuration, "IteratorAgeAlarmThresholdMs"), "Must stay below `WakeMaxRecordAgeSeconds` × 1000"},
		{"IteratorAgeAlarmThresholdMs description", tpl.Parameters["IteratorAgeAlarmThresholdMs"].Description, "Must stay below WakeMaxRecordAgeSeconds x 1000"},
		{"SweepRate row", docRow(t, configuration, "SweepRate"), "`rate(1 minute)` to `rate(5 minutes)`"},
		{"architecture, sweep", arch, "no reserved concurrency by default"},
	} {
		oneLine := strings.Join(strings.Fields(tc.text), " ")
		require.Contains(t, oneLine, tc.want, tc.what)
	}
	require.NotContains(t, arch, "reserved concurrency 1", "the sweep reserves none by default")
}
