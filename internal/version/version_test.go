package version

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersion_IsASemanticVersion(t *testing.T) {
	t.Parallel()
	// semver.org's own pattern, without the leading v (the git tag adds it).
	semver := regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	require.Regexp(t, semver, Version)
}

func TestBuild_StringNamesWhatWasStamped(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		b    Build
		want string
	}{
		{"unstamped", Build{Version: "1.2.3"}, "1.2.3"},
		{"a release build", Build{Version: "1.2.3", Commit: "0123456789abcdef0123", Time: "2026-12-07T16:00:00Z", Go: "go1.26.0"},
			"1.2.3 (commit 0123456789ab, 2026-12-07T16:00:00Z, go1.26.0)"},
		{"a dirty tree", Build{Version: "1.2.3", Commit: "0123456789abcdef", Modified: true}, "1.2.3 (commit 0123456789ab+dirty)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, c.b.String())
		})
	}
}

func TestRead_CarriesTheReleaseVersion(t *testing.T) {
	t.Parallel()
	require.Equal(t, Version, Read().Version)
}
