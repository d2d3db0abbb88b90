package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// buildBootstraps builds both functions for this machine into a temp dir.
func buildBootstraps(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"sweep", "wake"} {
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(dir, f, "bootstrap"), "../../functions/"+f)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}
