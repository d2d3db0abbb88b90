#!/usr/bin/env bash
# make release-go: checks .goreleaser.yaml, builds a snapshot release of it
# into dist/go (nothing is published), then checks what a user would
# download:
#
#   - every archive is there, and nothing else: the CLI for linux, darwin and
#     windows on amd64 and arm64 (tar.gz, zip on windows), with its LICENSE,
#     NOTICE, README.md, CHANGELOG.md and template.yaml; outflow-sweep and outflow-wake for
#     linux/arm64 (zip); the checksums file, which covers them all;
#   - the CLI of this machine's platform, taken from its archive, runs:
#     outflow --help, and outflow version prints internal/version's Version
#     and the commit; and, in the unpacked archive's directory with nothing
#     else, outflow moto serves (on the moto a user installs, here the
#     repository's) and outflow local provisions the archive's template on
#     it and runs;
#   - each bootstrap zip holds exactly one executable file named bootstrap, a
#     static 64-bit little-endian arm64 ELF built with -tags=lambda.norpc.
#
#   scripts/release-go.sh [path/to/goreleaser]    (make release-go passes bin/tools/goreleaser)
#   RELEASE_TAG=v1.0.0 make release-go            (the tag's release, not a snapshot)
set -euo pipefail
cd "$(dirname "$0")/.."

goreleaser=${1:-bin/tools/goreleaser}
dist=dist/go
go=${GO:-go}

fail() {
	echo "release-go: $*" >&2
	exit 1
}

# The one version of the release, from internal/version (the package's
# `const Version = "X.Y.Z"`); the snapshot is named after it.
version=$(sed -nE 's/^[[:space:]]*(const[[:space:]]+)?Version[[:space:]]*(string[[:space:]]*)?=[[:space:]]*"([^"]+)".*/\3/p' internal/version/*.go 2>/dev/null | head -n 1)
[ -n "$version" ] || fail "no Version constant found in internal/version"
commit=$(git rev-parse HEAD)

# goreleaser reads the commit, its date and the remote's URL together, and
# without a remote it reads none of them (a snapshot then stamps commit
# "none"): a clone without one gets the project's URL for this run only,
# through git's environment configuration, nothing written.
if [ -z "$(git remote)" ] && [ -z "${GIT_CONFIG_COUNT:-}" ]; then
	export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/outflowhq/outflow.git
fi

"$goreleaser" --version | sed -n 's/^GitVersion:[[:space:]]*/goreleaser /p'
"$goreleaser" check

# A snapshot, named after internal/version's Version; or, with RELEASE_TAG
# set (the release workflow), the release of that tag itself, which must be
# HEAD's, in a clean tree, and the version: the archives the workflow
# publishes, built and checked here, still not published.
start=$SECONDS
if [ -n "${RELEASE_TAG:-}" ]; then
	[ "$RELEASE_TAG" = "v$version" ] || fail "RELEASE_TAG $RELEASE_TAG is not v$version (internal/version)"
	"$goreleaser" release --clean --skip=publish,announce
else
	OUTFLOW_VERSION=$version "$goreleaser" release --snapshot --clean --skip=publish
fi
echo "release-go: goreleaser took $((SECONDS - start))s"

# The version goreleaser named the files with, from its metadata.
built=$(tr -d '\n' < "$dist/metadata.json" | sed -nE 's/.*"version":[[:space:]]*"([^"]+)".*/\1/p')
[ -n "$built" ] || fail "no version in $dist/metadata.json"
if [ -n "${RELEASE_TAG:-}" ]; then
	[ "$built" = "$version" ] || fail "goreleaser built version $built, not $version"
else
	[[ $built == "$version"-snapshot-* ]] || fail "snapshot version $built does not start with internal/version's $version"
fi

# Exactly the expected archives.
expected=()
for os in linux darwin windows; do
	for arch in amd64 arm64; do
		ext=tar.gz
		[ "$os" = windows ] && ext=zip
		expected+=("outflow_${built}_${os}_${arch}.${ext}")
	done
done
expected+=("outflow-sweep_${built}_linux_arm64.zip" "outflow-wake_${built}_linux_arm64.zip")
got=$(cd "$dist" && find . -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.zip' \) -printf '%f\n' | sort)
want=$(printf '%s\n' "${expected[@]}" | sort)
if [ "$got" != "$want" ]; then
	diff <(echo "$want") <(echo "$got") >&2 || true
	fail "the archives in $dist are not the expected ones (< expected, > built)"
fi

# The checksums file lists every archive, and they match.
checksums="$dist/outflow_${built}_checksums.txt"
[ -f "$checksums" ] || fail "no checksums file $checksums"
listed=$(awk '{print $2}' "$checksums" | sort)
[ "$listed" = "$want" ] || fail "$checksums does not list exactly the archives"
(cd "$dist" && sha256sum --quiet -c "$(basename "$checksums")") || fail "a checksum does not match"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each CLI archive: the binary and the four documents, at its root.
for archive in "${expected[@]}"; do
	case $archive in
	outflow_*.tar.gz) entries=$(tar -tzf "$dist/$archive" | sort | tr '\n' ' ') bin=outflow ;;
	outflow_*.zip) entries=$(unzip -Z1 "$dist/$archive" | sort | tr '\n' ' ') bin=outflow.exe ;;
	*) continue ;;
	esac
	want_entries=$(printf '%s\n' CHANGELOG.md LICENSE NOTICE README.md template.yaml "$bin" | sort | tr '\n' ' ')
	[ "$entries" = "$want_entries" ] || fail "$archive holds [$entries], want [$want_entries]"
done

# The CLI of this platform, run from its archive.
host_os=$("$go" env GOOS)
host_arch=$("$go" env GOARCH)
if [ "$host_os" = windows ]; then
	fail "run this on linux or macOS"
fi
cli_archive="$dist/outflow_${built}_${host_os}_${host_arch}.tar.gz"
[ -f "$cli_archive" ] || fail "no CLI archive for this machine ($host_os/$host_arch)"
mkdir "$tmp/cli"
tar -xzf "$cli_archive" -C "$tmp/cli"
"$tmp/cli/outflow" --help > "$tmp/help.txt" 2>&1 || {
	cat "$tmp/help.txt" >&2
	fail "outflow --help failed (from $cli_archive)"
}
printf 'release-go: outflow --help from %s: %s lines\n' "$(basename "$cli_archive")" "$(wc -l < "$tmp/help.txt")"
# outflow version: internal/version's Version, and the commit the ldflags
# stamped (what a bug report quotes).
out=$("$tmp/cli/outflow" version 2>&1) || {
	echo "$out" >&2
	fail "outflow version failed (from $cli_archive)"
}
echo "release-go: outflow version: $out"
[[ $out == "outflow $version "* ]] || fail "outflow version does not print $version"
[[ $out == *"commit ${commit:0:12}"* ]] || fail "outflow version does not print the commit ${commit:0:12}"

# The local stack from the archive alone: outflow moto on the moto a user
# installs (OUTFLOW_MOTO_PYTHON; here the repository's, make venv-moto),
# then outflow local provisioning the archive's template.yaml, run from the
# unpacked archive's directory, until it says it is ready.
moto_python=${OUTFLOW_MOTO_PYTHON:-$PWD/.venv/bin/python}
[ -x "$moto_python" ] || fail "no moto python at $moto_python: make venv-moto, or set OUTFLOW_MOTO_PYTHON"
(cd "$tmp/cli" && OUTFLOW_MOTO_PYTHON=$moto_python exec ./outflow moto --port 0 > "$tmp/moto.out" 2>&1) &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null; wait "$moto_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
endpoint=
for _ in $(seq 1 120); do
	endpoint=$(sed -nE 's/.* at (http:\/\/127\.0\.0\.1:[0-9]+), .*/\1/p' "$tmp/moto.out" | head -n 1)
	[ -n "$endpoint" ] && break
	kill -0 "$moto_pid" 2>/dev/null || break
	sleep 0.5
done
[ -n "$endpoint" ] || {
	cat "$tmp/moto.out" >&2
	fail "outflow moto from $(basename "$cli_archive") did not start"
}
(cd "$tmp/cli" && AWS_ENDPOINT_URL=$endpoint AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
	exec timeout 120 ./outflow local --no-demo > "$tmp/local.out" 2>&1) &
local_pid=$!
ready=
for _ in $(seq 1 240); do
	ready=$(grep -m1 '^outflow local: .* ready in ' "$tmp/local.out" || true)
	[ -n "$ready" ] && break
	kill -0 "$local_pid" 2>/dev/null || break
	sleep 0.5
done
kill "$local_pid" 2>/dev/null || true
wait "$local_pid" 2>/dev/null || true
[ -n "$ready" ] || {
	cat "$tmp/local.out" >&2
	fail "outflow local from $(basename "$cli_archive") did not provision its template.yaml on outflow moto"
}
echo "release-go: from the unpacked archive alone: $ready"

# The bootstraps: one file named bootstrap, executable, an arm64 ELF.
for fn in sweep wake; do
	zip="$dist/outflow-${fn}_${built}_linux_arm64.zip"
	entries=$(unzip -Z1 "$zip")
	[ "$entries" = bootstrap ] || fail "$(basename "$zip") holds [$(echo "$entries" | tr '\n' ' ')], want just [bootstrap]"
	mode=$(zipinfo "$zip" bootstrap | awk '{print $1}')
	[[ $mode == -rwx* ]] || fail "bootstrap in $(basename "$zip") is not executable ($mode)"
	mkdir "$tmp/$fn"
	unzip -q "$zip" -d "$tmp/$fn"
	# ELF header: magic, class 2 (64-bit), data 1 (little-endian) at bytes
	# 0-5; e_machine 0xb7 (EM_AARCH64) little-endian at bytes 18-19.
	magic=$(od -An -tx1 -N6 "$tmp/$fn/bootstrap" | tr -d ' \n')
	machine=$(od -An -tx1 -j18 -N2 "$tmp/$fn/bootstrap" | tr -d ' \n')
	[ "$magic" = 7f454c460201 ] || fail "bootstrap in $(basename "$zip") is not a 64-bit little-endian ELF (header $magic)"
	[ "$machine" = b700 ] || fail "bootstrap in $(basename "$zip") is not arm64 (e_machine $machine)"
	# How it was built, from the binary's own build info.
	info=$("$go" version -m "$tmp/$fn/bootstrap")
	grep -Eq '^[[:space:]]+build[[:space:]]+-tags=lambda\.norpc$' <<< "$info" || fail "bootstrap in $(basename "$zip") was not built with -tags=lambda.norpc"
	grep -Eq '^[[:space:]]+build[[:space:]]+CGO_ENABLED=0$' <<< "$info" || fail "bootstrap in $(basename "$zip") was not built with CGO_ENABLED=0"
	grep -Eq "^[[:space:]]+path[[:space:]]+github.com/outflowhq/outflow/functions/$fn\$" <<< "$info" || fail "bootstrap in $(basename "$zip") is not functions/$fn"
	echo "release-go: $(basename "$zip"): bootstrap, $(wc -c < "$tmp/$fn/bootstrap") bytes, ELF 64-bit LSB arm64, -tags=lambda.norpc, CGO_ENABLED=0"
done

echo "release-go: ok: $(( ${#expected[@]} )) archives of $built and their checksums in $dist"
