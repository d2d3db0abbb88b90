package hygiene_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// script is the check make lint runs on the tracked files.
var script, _ = filepath.Abs("../../.ci/tracked-files")

func TestTrackedFiles_RefusesBinariesLargeFilesAndNonScriptExecutables(t *testing.T) {
	t.Parallel()
	elf := append([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0}, make([]byte, 64)...)
	cases := []struct {
		name    string
		content []byte
		mode    os.FileMode
		refused string // what the script says, or "" when it passes
	}{
		{"source file", []byte("package main\n"), 0o644, ""},
		{"script", []byte("#!/usr/bin/env bash\necho hi\n"), 0o755, ""},
		{"text at the limit", bytes.Repeat([]byte("a\n"), 1<<19), 0o644, ""},
		{"compiled binary", elf, 0o755, "tracked binary file: f"},
		{"binary data", []byte("abc\x00def"), 0o644, "tracked binary file: f"},
		{"text over 1 MiB", bytes.Repeat([]byte("a\n"), 1<<19+1), 0o644, "tracked file over 1 MiB: f"},
		{"executable text that is not a script", []byte("not a script\n"), 0o755, "tracked executable that is not a script: f"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			git(t, dir, "init", "-q")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), tc.content, tc.mode))
			git(t, dir, "add", "f")
			cmd := exec.Command("bash", script)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if tc.refused == "" {
				require.NoError(t, err, string(out))
				return
			}
			require.Error(t, err, "the check passed a file it must refuse")
			require.Contains(t, string(out), tc.refused)
		})
	}
}

func TestTrackedFiles_ThisRepositoryPasses(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", script)
	cmd.Dir = filepath.Dir(filepath.Dir(script))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}
