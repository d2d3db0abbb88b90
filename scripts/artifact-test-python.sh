#!/usr/bin/env bash
# Installs the built wheel (dist/python, from scripts/release-python.sh)
# into a fresh virtualenv in a temporary directory outside the checkout,
# with only what the README's examples and their test need (pytest and
# aws-lambda-powertools, at python/requirements-test.txt's pins), and runs
# python/README.md's producer and consumer examples (tests/test_readme.py)
# on the patched moto server from there: the working directory outside the
# checkout, PYTHONPATH unset, python/src never on the path.
# tests/test_artifact.py runs first in the same session and fails unless
# outflowhq was imported from the fresh virtualenv's site-packages and
# every module of python/src/outflowhq was installed from the wheel.
#
# Usage: scripts/artifact-test-python.sh [DIST]   (DIST: dist/python)
# The moto server is the repository's (.venv, make venv-moto), as for
# make python-test; PYTHON (python3) makes the virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dist=$(cd "${1:-dist/python}" && pwd)

shopt -s nullglob
wheels=("$dist"/outflowhq-*.whl)
shopt -u nullglob
if [[ ${#wheels[@]} -ne 1 ]]; then
	echo "want one outflowhq wheel in $dist, found ${#wheels[@]}: run scripts/release-python.sh (make release-python) first" >&2
	exit 1
fi
wheel=${wheels[0]}

tmp=$(mktemp -d -t outflowhq-artifact.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
case "$(cd "$tmp" && pwd -P)/" in
"$(pwd -P)"/*)
	echo "the temporary directory $tmp is inside the checkout: set TMPDIR elsewhere" >&2
	exit 1
	;;
esac
venv=$tmp/venv

echo "== a fresh virtualenv in $venv, with $(basename "$wheel")"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check \
	-c "$root/python/requirements-test.txt" "$wheel" pytest aws-lambda-powertools
"$venv/bin/pip" show outflowhq | sed -n 's/^\(Name\|Version\|Location\): /  \1: /p'

echo "== the README's examples on the installed wheel, from $tmp"
cd "$tmp"
env -u PYTHONPATH -u PYTHONHOME \
	OUTFLOW_ARTIFACT_VENV="$venv" OUTFLOW_REQUIRE_MOTO=1 PYTHONDONTWRITEBYTECODE=1 \
	"$venv/bin/python" -m pytest -p no:cacheprovider -q -rs \
	"$root/python/tests/test_artifact.py" "$root/python/tests/test_readme.py"
