#!/usr/bin/env bash
# Prints the release notes of one version: its section of CHANGELOG.md (Keep
# a Changelog form, "## [1.0.0] - 2026-01-31"), without the heading. Fails if
# the section is missing or empty, so that no release goes out without notes.
#
#   scripts/release-notes.sh 1.0.0 > notes.md
#
# The release workflow passes the output to goreleaser --release-notes.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: scripts/release-notes.sh VERSION (without the v)}
version=${version#v}
changelog=${CHANGELOG:-CHANGELOG.md}

notes=$(awk -v want="$version" '
	/^## / {
		if (found) exit
		heading = $0
		sub(/^## \[?/, "", heading)
		sub(/[] ].*$/, "", heading)
		if (heading == want) { found = 1; next }
	}
	found { print }
	END { if (!found) exit 3 }
' "$changelog") || {
	echo "no section for $version in $changelog (a \"## [$version] - date\" heading)" >&2
	exit 1
}

# Trim leading and trailing blank lines; refuse a section with nothing in it.
notes=$(printf '%s\n' "$notes" | sed -e '/./,$!d')
if [ -z "${notes//[[:space:]]/}" ]; then
	echo "the section for $version in $changelog is empty" >&2
	exit 1
fi
printf '%s\n' "$notes"
