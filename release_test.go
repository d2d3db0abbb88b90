package outflow_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/outflowhq/outflow"
	"github.com/outflowhq/outflow/internal/cli"
	"github.com/outflowhq/outflow/internal/config"
)

// releaseFacts is what each place that names the release says.
type releaseFacts struct {
	pyVersion, pyLicense   string
	npmVersion, npmLicense string
	npmPrivate             bool
	npmRuntime             string
	sar                    map[string]any
	changelog              string
}

func readRelease(t *testing.T) releaseFacts {
	t.Helper()
	var f releaseFacts
	py, err := os.ReadFile("python/pyproject.toml")
	require.NoError(t, err)
	// The [project] table's own keys, before the next table.
	project := string(py)[strings.Index(string(py), "[project]"):]
	if i := strings.Index(project[1:], "\n["); i >= 0 {
		project = project[:i+1]
	}
	f.pyVersion = field(t, project, `(?m)^version\s*=\s*"([^"]+)"`)
	f.pyLicense = field(t, project, `(?m)^license\s*=\s*"([^"]+)"`)

	raw, err := os.ReadFile("typescript/package.json")
	require.NoError(t, err)
	var pkg struct {
		Version, License string
		Private          bool
	}
	require.NoError(t, json.Unmarshal(raw, &pkg))
	f.npmVersion, f.npmLicense, f.npmPrivate = pkg.Version, pkg.License, pkg.Private
	raw, err = os.ReadFile("typescript/src/version.ts")
	require.NoError(t, err)
	f.npmRuntime = field(t, string(raw), `(?m)^export const VERSION = "([^"]+)";$`)

	raw, err = os.ReadFile("template.yaml")
	require.NoError(t, err)
	var tpl struct {
		Metadata map[string]map[string]any `yaml:"Metadata"`
	}
	// The template's short-form tags (!Ref, !Sub) decode as plain values
	// into the untyped map: only Metadata is read.
	require.NoError(t, yaml.Unmarshal(raw, &tpl))
	f.sar = tpl.Metadata["AWS::ServerlessRepo::Application"]
	require.NotNil(t, f.sar, "template.yaml has Metadata: AWS::ServerlessRepo::Application")

	raw, err = os.ReadFile("CHANGELOG.md")
	require.NoError(t, err)
	f.changelog = string(raw)
	return f
}

func field(t *testing.T, text, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	require.NotNil(t, m, "no %s in %q", pattern, text)
	return m[1]
}

// One version for the whole release: the Go module's (its tag), the
// Python and npm packages', the template's SemanticVersion and source
// URL, the CLI's, the dispatcher's published item's and the changelog's
// latest release. docs/releasing.md lists them; the release workflow
// refuses a tag that is not this version.
func TestVersion_IsOneEverywhere(t *testing.T) {
	t.Parallel()
	f := readRelease(t)
	var out, errOut bytes.Buffer
	require.Equal(t, cli.ExitOK, cli.Execute(t.Context(), []string{"version"}, &out, &errOut, func(string) string { return "" }), errOut.String())
	// The first release heading after [Unreleased].
	released := field(t, f.changelog, `(?m)^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$`)

	cases := []struct{ where, says string }{
		{"python/pyproject.toml [project] version", f.pyVersion},
		{"typescript/package.json version", f.npmVersion},
		{"typescript/src/version.ts VERSION", f.npmRuntime},
		{"template.yaml SemanticVersion", f.sar["SemanticVersion"].(string)},
		{"template.yaml SourceCodeUrl's tag", strings.TrimPrefix(f.sar["SourceCodeUrl"].(string), "https://github.com/outflowhq/outflow/tree/v")},
		{"outflow version", strings.Fields(out.String())[1]},
		{"the published configuration item", config.Config{}.Published().Version},
		{"CHANGELOG.md's latest release", released},
	}
	for _, c := range cases {
		t.Run(c.where, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, outflow.Version, c.says, "%s says %s; the release is %s", c.where, c.says, outflow.Version)
		})
	}
	require.Contains(t, f.changelog, "["+outflow.Version+"]: https://github.com/outflowhq/outflow/releases/tag/v"+outflow.Version,
		"the changelog links the release")
	require.Regexp(t, `(?m)^### Upgrading`, f.changelog[strings.Index(f.changelog, "## ["+outflow.Version+"]"):],
		"the release has an Upgrading note")
}

// One licence, Apache-2.0: the root LICENSE (which the Go module ships),
// the Python and npm packages' metadata, and the Serverless Application
// Repository's SPDX id.
func TestLicence_IsApache2Everywhere(t *testing.T) {
	t.Parallel()
	f := readRelease(t)
	licence, err := os.ReadFile("LICENSE")
	require.NoError(t, err)
	require.Contains(t, string(licence), "Apache License\n                           Version 2.0, January 2004")
	require.Contains(t, string(licence), "END OF TERMS AND CONDITIONS")
	for where, id := range map[string]string{
		"python/pyproject.toml license":   f.pyLicense,
		"typescript/package.json license": f.npmLicense,
		"template.yaml SpdxLicenseId":     f.sar["SpdxLicenseId"].(string),
	} {
		require.Equal(t, "Apache-2.0", id, where)
	}
	require.False(t, f.npmPrivate, "the npm package is publishable")
	require.Equal(t, "LICENSE", f.sar["LicenseUrl"], "sam publish uploads the root LICENSE")
}

// The Serverless Application Repository metadata holds every field
// `sam publish` needs to make the stack deployable without a clone, each
// within the repository's limits.
func TestTemplate_ServerlessRepoMetadataPublishes(t *testing.T) {
	t.Parallel()
	sar := readRelease(t).sar
	for _, k := range []string{"Name", "Description", "Author", "SpdxLicenseId", "LicenseUrl", "ReadmeUrl", "Labels", "HomePageUrl", "SemanticVersion", "SourceCodeUrl"} {
		require.NotEmpty(t, sar[k], "Metadata AWS::ServerlessRepo::Application.%s", k)
	}
	// The CreateApplication API's patterns and lengths (Author's is
	// ^[a-z0-9](([a-z0-9]|-(?!-))*[a-z0-9])?$, written without the
	// lookahead Go's regexp lacks).
	require.Regexp(t, `^[a-zA-Z0-9\-]{1,140}$`, sar["Name"])
	require.LessOrEqual(t, len(sar["Description"].(string)), 256)
	require.Regexp(t, `^[a-z0-9]+(-[a-z0-9]+)*$`, sar["Author"], "lower case, single hyphens inside")
	require.LessOrEqual(t, len(sar["Author"].(string)), 127)
	labels := sar["Labels"].([]any)
	require.LessOrEqual(t, len(labels), 10)
	for _, l := range labels {
		require.Regexp(t, `^[a-zA-Z0-9+\-_:/@]{1,127}$`, l)
	}
	for _, local := range []string{"LicenseUrl", "ReadmeUrl"} {
		_, err := os.Stat(sar[local].(string))
		require.NoError(t, err, "%s names a file sam publish uploads", local)
	}
}
