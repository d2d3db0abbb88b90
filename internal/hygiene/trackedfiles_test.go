package hygiene_test

import (
	"bytes"
	"cmp"
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
		file    string // "" is f
		content []byte
		mode    os.FileMode
		refused string // what the script says, or "" when it passes
	}{
		{"source file", "", []byte("package main\n"), 0o644, ""},
		{"script", "", []byte("#!/usr/bin/env bash\necho hi\n"), 0o755, ""},
		{"script with a name git would quote", " déploy.sh", []byte("#!/bin/sh\n"), 0o755, ""},
		{"text with old Mac line ends", "", []byte("line1\rline2\r"), 0o644, ""},
		{"text at the limit", "", bytes.Repeat([]byte("a\n"), 1<<19), 0o644, ""},
		{"compiled binary", "", elf, 0o755, "tracked binary file: f"},
		{"binary data", "", []byte("abc\x00def"), 0o644, "tracked binary file: f"},
		{"binary with a name git would quote", "bïn ary", []byte("abc\x00def"), 0o644, "tracked binary file: bïn ary"},
		{"a PNG in docs", "docs/shot.png", append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13), 0o644, ""},
		{"a PNG elsewhere", "shot.png", append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13), 0o644, "tracked binary file: shot.png"},
		{"binary data named .png in docs", "docs/fake.png", []byte("abc\x00def"), 0o644, "tracked binary file: docs/fake.png"},
		{"text over 1 MiB", "", bytes.Repeat([]byte("a\n"), 1<<19+1), 0o644, "tracked file over 1 MiB: f"},
		{"executable text that is not a script", "", []byte("not a script\n"), 0o755, "tracked executable that is not a script: f"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			git(t, dir, "init", "-q")
			name := cmp.Or(tc.file, "f")
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), tc.content, tc.mode))
			git(t, dir, "add", "--", name)
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

func TestTrackedFiles_SkipsSubmodules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	git(t, dir, "update-index", "--add", "--cacheinfo", "160000,0123456789abcdef0123456789abcdef01234567,vendor/lib")
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
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
