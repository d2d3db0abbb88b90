#!/usr/bin/env bash
# Builds the Python package's sdist and wheel (python/) into dist/python
# with `python -m build`, checks them with `twine check --strict`, then
# checks what they hold: the wheel every module of python/src/outflowhq,
# py.typed, LICENSE and NOTICE (identical to the repository's) and the
# metadata a release needs; the sdist the sources, pyproject.toml,
# README.md, LICENSE and NOTICE, and no tests.
#
# The sdist leaves python/tests out on purpose: they read the shared
# vectors in conformance/ and start the patched moto server of
# internal/moto, neither under python/, so from an sdist they could not
# run. `python -m build` builds the wheel from the sdist, so a file the
# sdist misses is missing from the wheel too, and fails the wheel's check.
#
# Usage: scripts/release-python.sh [PYTHON]
#   PYTHON has build and twine (python/requirements-release.txt; make
#   release-python installs them into .venv-release). The installed
#   wheel's own test is scripts/artifact-test-python.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${1:-$root/.venv-release/bin/python}
out=$root/dist/python

rm -rf "$out"
echo "== python -m build: sdist, then the wheel from it, into dist/python"
"$python" -m build --outdir "$out" python
echo "== twine check --strict"
"$python" -m twine check --strict "$out"/*

echo "== the artifacts' contents"
"$python" - "$root" "$out" <<'EOF'
import re
import sys
import tarfile
import tomllib
import zipfile
from email.parser import BytesParser
from pathlib import Path

root, out = Path(sys.argv[1]), Path(sys.argv[2])
with (root / "python" / "pyproject.toml").open("rb") as f:
    version = tomllib.load(f)["project"]["version"]
src = root / "python" / "src"
# Every module and data file of the package, as the source tree has them.
package = sorted(p.relative_to(src).as_posix() for p in (src / "outflowhq").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".typed"))
assert "outflowhq/py.typed" in package and "outflowhq/consume/__init__.py" in package, package
licences = {name: (root / name).read_bytes() for name in ("LICENSE", "NOTICE")}
problems = []

def check(ok, what):
    if not ok:
        problems.append(what)

found = sorted(p.name for p in out.iterdir())
wheel_name, sdist_name = f"outflowhq-{version}-py3-none-any.whl", f"outflowhq-{version}.tar.gz"
check(found == [wheel_name, sdist_name], f"dist/python holds {found}, not [{wheel_name}, {sdist_name}]")

with zipfile.ZipFile(out / wheel_name) as whl:
    names = set(whl.namelist())
    info = f"outflowhq-{version}.dist-info"
    for p in package:
        check(p in names, f"the wheel misses {p}")
    stray = sorted(n for n in names if not n.startswith(("outflowhq/", info + "/")))
    check(not stray, f"the wheel holds files outside outflowhq/ and its dist-info: {stray}")
    extra = sorted(n for n in names if n.startswith("outflowhq/") and n not in package)
    check(not extra, f"the wheel holds files the source tree has not: {extra}")
    for name, text in licences.items():
        member = f"{info}/licenses/{name}"
        check(member in names and whl.read(member) == text, f"the wheel's {member} is missing or not the repository's {name}")
    meta = BytesParser().parsebytes(whl.read(f"{info}/METADATA"))
    check(meta["Name"] == "outflowhq" and meta["Version"] == version, f"METADATA names {meta['Name']} {meta['Version']}")
    check(meta["License-Expression"] == "Apache-2.0", f"License-Expression: {meta['License-Expression']}")
    check(sorted(meta.get_all("License-File") or []) == ["LICENSE", "NOTICE"], f"License-File: {meta.get_all('License-File')}")
    check(not [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")], "a License :: classifier beside the expression")
    check(meta["Requires-Python"] == ">=3.11", f"Requires-Python: {meta['Requires-Python']}")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    check(set(urls) >= {"Homepage", "Source", "Issues", "Changelog"}, f"Project-URL: {urls}")

with tarfile.open(out / sdist_name) as sdist:
    top = f"outflowhq-{version}/"
    names = {m.name.removeprefix(top) for m in sdist.getmembers() if m.isfile()}
    for p in ["pyproject.toml", "README.md", "PKG-INFO", "LICENSE", "NOTICE"] + ["src/" + p for p in package]:
        check(p in names, f"the sdist misses {p}")
    for name, text in licences.items():
        f = sdist.extractfile(top + name) if name in names else None
        check(f is not None and f.read() == text, f"the sdist's {name} is not the repository's")
    tests = sorted(n for n in names if re.match(r"tests?/", n))
    check(not tests, f"the sdist holds tests, which cannot run outside the repository: {tests}")

if problems:
    sys.exit("\n".join(["dist/python is not releasable:"] + ["  " + p for p in problems]))
print(f"{wheel_name}: {len(package)} package files, LICENSE, NOTICE, metadata: ok")
print(f"{sdist_name}: sources, pyproject.toml, README.md, LICENSE, NOTICE, no tests: ok")
EOF
ls -l "$out"
