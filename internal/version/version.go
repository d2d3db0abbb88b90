// Package version is Outflow's release version: one semantic version for
// the Go module's tag, the Python and npm packages, the template's
// SemanticVersion, the CLI and the dispatcher's published configuration.
// TestVersion_IsOneEverywhere (in the repository root) fails when any of
// them disagree, and the release workflow refuses a tag that is not it.
package version

import (
	"runtime/debug"
	"strings"
)

// Version is the release this source is. docs/releasing.md says how to
// change it (and where else it is written).
const Version = "1.0.0"

// Commit and Date are the revision and its commit time, set by a release
// build with -ldflags "-X github.com/outflowhq/outflow/internal/version.Commit=…"
// (.goreleaser.yaml does): Go's own VCS stamp is missing where a build
// runs with -buildvcs=false or outside a checkout. Read falls back to the
// stamp when they are empty.
var (
	Commit string
	Date   string
)

// Build describes the binary running: the release version, and the commit
// and commit time Go stamps into a binary built from a git checkout.
type Build struct {
	// Version is the release version (Version).
	Version string
	// Commit is the VCS revision the binary was built from, "" when it
	// was not stamped (go run, go test, a build outside a checkout).
	Commit string
	// Time is the revision's commit time in RFC 3339, "" when unstamped.
	Time string
	// Modified reports a build from a work tree with uncommitted changes.
	Modified bool
	// Go is the Go version that built the binary.
	Go string
}

// Read returns the running binary's build. Go stamps the VCS settings
// itself (go build in a git checkout, -buildvcs=auto), and a release build sets Commit and Date,
// which win.
func Read() Build {
	b := Build{Version: Version, Commit: Commit, Time: Date}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if b.Commit != "" {
		b.Go = info.GoVersion
		return b
	}
	b.Go = info.GoVersion
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `outflow version` prints: the version, then in
// parentheses the commit (12 hex digits, "+dirty" for a modified tree),
// its commit time and the Go version, each where known.
func (b Build) String() string {
	var parts []string
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if b.Modified {
			c += "+dirty"
		}
		parts = append(parts, "commit "+c)
	}
	if b.Time != "" {
		parts = append(parts, b.Time)
	}
	if b.Go != "" {
		parts = append(parts, b.Go)
	}
	if len(parts) == 0 {
		return b.Version
	}
	return b.Version + " (" + strings.Join(parts, ", ") + ")"
}
