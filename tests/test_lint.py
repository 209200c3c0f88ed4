"""ruff and mypy run with the tests, so the one test command checks everything."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def test_ruff():
    done = subprocess.run([tool("ruff"), "check", "mgpu_doctor", "tests", "benchmarks", "tools"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy():
    done = subprocess.run([tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
