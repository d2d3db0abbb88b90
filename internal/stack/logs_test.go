package stack_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTranslation_SystemLogsKeepStartAndReport(t *testing.T) {
	t.Parallel()
	tr := translated(t, nil)
	fns := tr.OfType("AWS::Lambda::Function")
	require.Len(t, fns, 2)
	for _, name := range fns {
		var fn struct {
			LoggingConfig struct{ LogFormat, ApplicationLogLevel, SystemLogLevel string }
		}
		resourceOf(t, tr, name, "AWS::Lambda::Function", &fn)
		require.Equal(t, "JSON", fn.LoggingConfig.LogFormat, name)
		require.Equal(t, tr.Parameters["LogLevel"].Value, fn.LoggingConfig.ApplicationLogLevel, name)
		// WARN drops the START and REPORT lines (duration, memory, init).
		require.Contains(t, []string{"INFO", "DEBUG"}, fn.LoggingConfig.SystemLogLevel, name)
	}
}
