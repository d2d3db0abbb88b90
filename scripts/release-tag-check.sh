#!/usr/bin/env bash
# Refuses a release tag that is not the version written in the tree. The
# release workflow runs it first, before anything is built; run it yourself
# before you push a tag:
#
#   scripts/release-tag-check.sh v1.0.0
#
# The tag (vX.Y.Z, or vX.Y.Z-rc.N) must equal, without its v:
#   - `outflow version` (internal/version's Version, from the CLI itself);
#   - python/pyproject.toml's version and typescript/package.json's;
#   - template.yaml's SemanticVersion (the Serverless Application Repository);
# and CHANGELOG.md must have a section for it (the release notes).
# TestVersion_IsOneEverywhere ties the four in every test run; this ties the
# tag to them.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:?usage: scripts/release-tag-check.sh vX.Y.Z}
go=${GO:-go}
python=${PYTHON:-python3}

if ! [[ $tag =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "tag $tag is not a semantic version vX.Y.Z (or vX.Y.Z-pre)" >&2
	exit 1
fi
want=${tag#v}
fail=0
check() { # check NAME VALUE
	if [ "$2" = "$want" ]; then
		printf '  %-36s %s\n' "$1" "$2"
	else
		printf '  %-36s %s, not %s\n' "$1" "${2:-(none)}" "$want" >&2
		fail=1
	fi
}

echo "release tag $tag:"
cli=$("$go" run ./cmd/outflow version)
cli=${cli#outflow }
check "outflow version" "${cli%% *}"
check "python/pyproject.toml version" "$("$python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' python/pyproject.toml)"
check "typescript/package.json version" "$(node -p 'require("./typescript/package.json").version')"
check "template.yaml SemanticVersion" "$(sed -nE 's/^[[:space:]]+SemanticVersion:[[:space:]]*"?([^"[:space:]]+)"?.*/\1/p' template.yaml | head -n 1)"
if notes=$(scripts/release-notes.sh "$want" 2>&1); then
	printf '  %-36s %s lines\n' "CHANGELOG.md section" "$(wc -l <<< "$notes")"
else
	echo "  $notes" >&2
	fail=1
fi

if [ "$fail" -ne 0 ]; then
	echo "the tag does not match the tree: bump the version (docs/releasing.md) or fix the tag" >&2
	exit 1
fi
