#!/usr/bin/env bash
# Packs the TypeScript package (typescript/) as `npm publish` would, into
# dist/typescript/, and checks the tarball before anyone installs it:
# publint and attw (@arethetypeswrong/cli, the esm-only profile: the package
# is ESM) on it, its file list against the one expected (the compiled code,
# its types and source maps, the sources the maps name, package.json,
# README.md, LICENSE, NOTICE: nothing more, nothing less), LICENSE and NOTICE
# against the repository's; then scripts/artifact-test-typescript.sh
# installs it in a fresh project and runs the README's examples against
# moto. `make release-typescript` runs it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=$root/typescript
out=$root/dist/typescript
start=$SECONDS

fail() {
	echo "release-typescript: $*" >&2
	exit 1
}

cd "$pkg"
# The Makefile's stamp: npm ci when package.json or the lock changed since.
stamp=node_modules/.installed
if [[ ! -f $stamp || package.json -nt $stamp || package-lock.json -nt $stamp ]]; then
	npm ci --no-audit --no-fund --loglevel=error
	touch "$stamp"
fi

version=$(node -p 'require("./package.json").version')
tarball=$out/outflowhq-outflow-$version.tgz
mkdir -p "$out"
rm -f "$tarball"
echo "== npm pack (prepack builds dist/src afresh)"
npm pack --pack-destination "$out" --loglevel=error >/dev/null
[[ -f $tarball ]] || fail "npm pack made no $tarball"
echo "$tarball"

echo "== publint"
npx --no-install publint run --strict "$tarball"

echo "== attw --profile esm-only"
npx --no-install attw "$tarball" --profile esm-only

echo "== contents"
expected=$(
	printf 'package/%s\n' package.json README.md LICENSE NOTICE
	while IFS= read -r src; do
		base=${src%.ts}
		printf 'package/%s\n' "$src" "dist/$base.js" "dist/$base.d.ts" "dist/$base.js.map"
	done < <(find src -type f -name '*.ts' ! -name '*.d.ts')
)
actual=$(tar -tzf "$tarball")
if ! diff -u <(sort <<<"$expected") <(sort <<<"$actual") >&2; then
	fail "the tarball's files (+) are not the ones expected (-): fix \"files\" in typescript/package.json, or this list"
fi
echo "$(wc -l <<<"$actual") files, as expected"
for f in LICENSE NOTICE; do
	cmp -s <(tar -xzOf "$tarball" "package/$f") "$root/$f" || fail "the tarball's $f is not the repository's"
done

echo "== the README's examples from the tarball, in a fresh project"
"$root/scripts/artifact-test-typescript.sh" "$tarball"

echo "release-typescript: $tarball checked in $((SECONDS - start)) s"
