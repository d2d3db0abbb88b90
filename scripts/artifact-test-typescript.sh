#!/usr/bin/env bash
# Usage: scripts/artifact-test-typescript.sh TARBALL
#
# Installs the packed npm package (dist/typescript/outflowhq-outflow-*.tgz)
# as an adopter would: a fresh npm project ("type": "module") in a
# temporary folder outside the checkout, `npm install TARBALL` with the peer
# dependency @aws-sdk/client-dynamodb, typescript and @types/node at the
# versions typescript/package.json pins. Then typescript/test/artifact.test.ts
# (compiled from the checkout: the test harness, not the package) writes
# typescript/README.md's ts blocks, as the tarball shipped it, into that
# project, type-checks them with the project's tsc (NodeNext, Node16,
# Bundler), runs them against the patched moto server, and checks that
# every import came from the project's node_modules.
# OUTFLOW_KEEP_ARTIFACT=1 keeps the project.
set -euo pipefail

[[ $# -eq 1 && -f $1 ]] || {
	echo "usage: $0 TARBALL (an npm pack of typescript/)" >&2
	exit 2
}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=$root/typescript
tarball=$(realpath "$1")

cd "$pkg"
stamp=node_modules/.installed
if [[ ! -f $stamp || package.json -nt $stamp || package-lock.json -nt $stamp ]]; then
	npm ci --no-audit --no-fund --loglevel=error
	touch "$stamp"
fi
pin() { node -p "require('./package.json').devDependencies['$1']"; }
sdk=$(pin @aws-sdk/client-dynamodb)
typescript=$(pin typescript)
types=$(pin @types/node)
# The harness (test/*.ts) compiled; the package's own dist/src is not used.
npx --no-install tsc -p .

project=$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/outflow-artifact-typescript.XXXXXX")")
cleanup() {
	if [[ -n ${OUTFLOW_KEEP_ARTIFACT:-} ]]; then
		echo "kept $project"
	else
		rm -rf "$project"
	fi
}
trap cleanup EXIT
case "$project/" in
"$root"/*)
	echo "$project is inside the checkout: set TMPDIR elsewhere" >&2
	exit 1
	;;
esac

cd "$project"
cat >package.json <<'JSON'
{
  "name": "outflow-artifact-test",
  "version": "0.0.0",
  "private": true,
  "type": "module"
}
JSON
echo "npm install $tarball @aws-sdk/client-dynamodb@$sdk typescript@$typescript @types/node@$types (in $project)"
npm install --no-audit --no-fund --loglevel=error --save-exact \
	"$tarball" "@aws-sdk/client-dynamodb@$sdk" "typescript@$typescript" "@types/node@$types"

# Run from the project, as its own code runs.
OUTFLOW_ARTIFACT_PROJECT=$project OUTFLOW_REQUIRE_MOTO=1 node --test "$pkg/dist/test/artifact.test.js"
