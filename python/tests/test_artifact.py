"""The installed-artifact check that scripts/artifact-test-python.sh runs
beside test_readme.py, in a fresh virtualenv outside the checkout where
only the built wheel is installed: outflowhq is imported from that
virtualenv's site-packages, not from python/src, and holds every module
the source tree has. Outside that script (OUTFLOW_ARTIFACT_VENV unset) it
is skipped."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

import outflowhq

SRC = Path(__file__).resolve().parent.parent / "src" / "outflowhq"
VENV = os.environ.get("OUTFLOW_ARTIFACT_VENV")

pytestmark = pytest.mark.skipif(not VENV, reason="only in scripts/artifact-test-python.sh (OUTFLOW_ARTIFACT_VENV names its virtualenv)")


def installed() -> Path:
    return Path(outflowhq.__file__).resolve().parent


def test_outflowhq_is_the_wheels_not_the_source_trees() -> None:
    assert VENV
    venv = Path(VENV).resolve()
    assert Path(sys.prefix).resolve() == venv, f"pytest runs in {sys.prefix}, not the fresh virtualenv {venv}"
    pkg = installed()
    assert pkg.is_relative_to(venv) and "site-packages" in pkg.parts, f"outflowhq was imported from {pkg}, not from {venv}'s site-packages"
    assert not pkg.is_relative_to(SRC.parent.parent.parent), f"outflowhq was imported from the checkout ({pkg})"
    assert outflowhq.__version__ != "0+unknown", "outflowhq has no installed metadata"


def test_every_module_is_installed_and_imports() -> None:
    # Read from python/src for the list of names only: nothing is imported from it.
    want = sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*") if p.suffix in (".py", ".typed") and "__pycache__" not in p.parts)
    pkg = installed()
    missing = [p for p in want if not (pkg / p).is_file()]
    assert not missing, f"the wheel installed no {missing}"
    for p in want:
        if not p.endswith(".py"):
            continue
        parts = p.removesuffix(".py").split("/")
        name = ".".join(["outflowhq", *(parts[:-1] if parts[-1] == "__init__" else parts)])
        module = importlib.import_module(name)
        assert module.__file__ and Path(module.__file__).resolve().is_relative_to(pkg), f"{name} came from {module.__file__}"
