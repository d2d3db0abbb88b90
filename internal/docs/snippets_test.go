package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/docs"
)

// TestDocs_GoSnippetsCompileAgainstTheAPI builds every ```go block of
// README.md and docs/*.md, as a module of its own that requires this one
// through a replace, with go vet: a snippet that stops compiling against
// the real API fails here, named by its Markdown file and line.
func TestDocs_GoSnippetsCompileAgainstTheAPI(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs(root)
	require.NoError(t, err)
	var snippets []docs.Snippet
	for _, file := range markdown(t) {
		raw, err := os.ReadFile(filepath.Join(repo, file))
		require.NoError(t, err)
		found := docs.GoSnippets(filepath.Join(repo, file), string(raw))
		if file == "README.md" {
			require.GreaterOrEqual(t, len(found), 2, "the README shows the producer")
		}
		snippets = append(snippets, found...)
	}
	dir := t.TempDir()
	writeModule(t, repo, dir)
	for i, s := range snippets {
		src, err := s.Source()
		require.NoError(t, err)
		pkg := filepath.Join(dir, fmt.Sprintf("s%02d", i))
		require.NoError(t, os.Mkdir(pkg, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte(src), 0o644))
	}
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), goTool, "vet", "./...")
	cmd.Dir = dir
	// Offline, and never touching this module's go.mod: every module the
	// snippets need is one this module already requires.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the Go snippets do not compile:\n%s", out)
}

// writeModule writes dir/go.mod, a module that requires this one (at repo,
// through a replace) and everything it requires, and its go.sum.
func writeModule(t *testing.T, repo, dir string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	require.NoError(t, err)
	text := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(mod), "module outflow.snippets")
	text += fmt.Sprintf("\nrequire github.com/outflowhq/outflow v0.0.0\n\nreplace github.com/outflowhq/outflow => %s\n", repo)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(text), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
}

func TestGoSnippets_TellFilesFromMarkedFragments(t *testing.T) {
	t.Parallel()
	md := strings.Join([]string{
		"# Title",
		"```go",
		"package main",
		"```",
		docs.FragmentMarker,
		"",
		"```go",
		"keys, err := p.Put(ctx, outflow.Row{Queue: \"q\", Payload: body})",
		"```",
		"```go",
		"x := 1",
		"```",
		"```sh",
		"make run",
		"```",
	}, "\n")
	got := docs.GoSnippets("doc.md", md)
	require.Len(t, got, 3)
	require.Equal(t, docs.Snippet{File: "doc.md", Line: 3, Code: "package main"}, got[0])
	require.True(t, got[1].Fragment)
	require.Equal(t, 8, got[1].Line)
	require.False(t, got[2].Fragment, "the marker is for the block right after it")

	src, err := got[1].Source()
	require.NoError(t, err)
	require.Contains(t, src, "\n//line doc.md:8\nkeys, err := p.Put(")
	require.Contains(t, src, "\t_ = keys\n\t_ = err\n")
	require.Contains(t, src, "\"github.com/outflowhq/outflow\"")
	require.NotContains(t, src, "\"errors\"", "only the packages it uses")

	_, err = got[2].Source()
	require.ErrorIs(t, err, docs.ErrNotAFile)
}
