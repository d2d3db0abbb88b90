package moto_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/moto"
)

// TestRequirement_IsWhatTheRepositoryPins keeps the moto a user outside
// the repository is told to install (moto.Requirement, in Path's error)
// the one make venv-moto installs and the server's patches are tested
// with.
func TestRequirement_IsWhatTheRepositoryPins(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../requirements-moto.txt")
	require.NoError(t, err)
	var pins []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			pins = append(pins, line)
		}
	}
	require.Equal(t, []string{moto.Requirement}, pins)
}
