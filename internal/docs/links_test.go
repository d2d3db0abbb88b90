package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/docs"
)

// root is the repository, from this package's directory.
const root = "../.."

// markdown returns README.md and every docs/*.md, relative to root.
func markdown(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func TestDocs_EveryRelativeLinkAndAnchorResolves(t *testing.T) {
	t.Parallel()
	broken, err := docs.CheckLinks(root, markdown(t))
	require.NoError(t, err)
	require.Empty(t, broken, "broken links:\n%s", strings.Join(broken, "\n"))
}

func TestCheckLinks_ReportsAMissingFileOrAnchor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "docs"), 0o755))
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/a.md#the-stats-command) [ok](#top) [ok](docs/) [web](https://example.com/x#y)",
		"[gone](docs/missing.md) [no anchor](docs/a.md#nowhere) `[in code](docs/nope.md)`",
		"```",
		"[in a fence](docs/nope.md)",
		"```",
		"[bad own anchor](#bottom) [second](docs/a.md#alarms-1) [third](docs/a.md#alarms-2)",
	}, "\n"))
	write("docs/a.md", "## The `stats` command\n\n## Alarms\n\n## Alarms\n")
	broken, err := docs.CheckLinks(dir, []string{"README.md", "docs/a.md"})
	require.NoError(t, err)
	require.Equal(t, []string{
		"README.md:3: docs/missing.md: no such file",
		"README.md:3: docs/a.md#nowhere: no heading or anchor #nowhere in docs/a.md",
		"README.md:7: #bottom: no heading or anchor #bottom in README.md",
		"README.md:7: docs/a.md#alarms-2: no heading or anchor #alarms-2 in docs/a.md",
	}, broken)
}

func TestSlug_IsGitHubsAnchorForAHeading(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ heading, slug string }{
		{"Re-driving the bus's dead letters", "re-driving-the-buss-dead-letters"},
		{"The `outflow` CLI", "the-outflow-cli"},
		{"The local stack: `make run`", "the-local-stack-make-run"},
		{"Why not EventBridge Pipes or a plain stream function?", "why-not-eventbridge-pipes-or-a-plain-stream-function"},
		{"Throughput under the latency fakes (5ms per DynamoDB call, 15ms per SQS call)", "throughput-under-the-latency-fakes-5ms-per-dynamodb-call-15ms-per-sqs-call"},
		{"Draining a backlog of 1,000,000 rows", "draining-a-backlog-of-1000000-rows"},
		{"Outflow architecture (as built)", "outflow-architecture-as-built"},
		{"See [the docs](docs/x.md) — **now**", "see-the-docs--now"},
		{"snake_case keys", "snake_case-keys"},
	} {
		require.Equal(t, tc.slug, docs.Slug(tc.heading), tc.heading)
	}
}
