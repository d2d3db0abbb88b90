"""The distribution's metadata: its version as the package reports it, and
the licence files the wheel and sdist carry (copies of the repository's,
since an sdist holds only what is under python/)."""

from __future__ import annotations

import tomllib
from importlib.metadata import metadata
from pathlib import Path

import pytest

import outflowhq

PYTHON = Path(__file__).resolve().parent.parent
ROOT = PYTHON.parent


def project() -> dict[str, object]:
    with (PYTHON / "pyproject.toml").open("rb") as f:
        table = tomllib.load(f)["project"]
    assert isinstance(table, dict)
    return table


def test_version_is_the_installed_distributions() -> None:
    # outflowhq.__version__ reads the installed metadata: an install older
    # than pyproject.toml (make python-test reinstalls when it changes), or
    # a package imported from an uninstalled source tree, fails here.
    assert outflowhq.__version__ == project()["version"]
    assert metadata("outflowhq")["Name"] == "outflowhq"


def test_licence_is_an_spdx_expression() -> None:
    p = project()
    assert p["license"] == "Apache-2.0"
    assert p["license-files"] == ["LICENSE", "NOTICE"]
    classifiers = p["classifiers"]
    assert isinstance(classifiers, list)
    assert not [c for c in classifiers if c.startswith("License ::")], "PEP 639: no licence classifier beside an expression"


@pytest.mark.parametrize("name", ["LICENSE", "NOTICE"])
def test_licence_files_are_the_repositorys(name: str) -> None:
    # A copy, not a symlink: an sdist would carry the link, not the text.
    copy = PYTHON / name
    assert not copy.is_symlink(), f"{copy} is a symlink"
    assert copy.read_bytes() == (ROOT / name).read_bytes(), f"{copy} differs from {ROOT / name}: cp {ROOT / name} {copy}"
