from __future__ import annotations

import os

import pytest

from mgpu_doctor.model.snapshot import Snapshot, load_snapshot
from tests.scenarios import SCENARIOS, path_of


@pytest.fixture(autouse=True, scope="session")
def _parse_cache_of_the_session(tmp_path_factory):
    """The doctors the tests start keep parsed matrices in a folder of the session, not in
    the user's ~/.cache (the children inherit the setting)."""
    from mgpu_doctor.process.cache_home import CACHE_ENV

    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("parse-cache"))
    yield
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before


@pytest.fixture
def scenario():
    """Load a recorded snapshot from tests/data by name (through the real loader)."""

    def load(name: str) -> Snapshot:
        assert name in SCENARIOS, name
        return load_snapshot(path_of(name))

    return load


@pytest.fixture(scope="session")
def smoke_report_file(tmp_path_factory):
    """One real smoke run shared by the picture tests: `dense` on 2 virtual CPU devices at two
    global batches (so the scaling map has a line), as the `--format json` report file."""
    import os
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("smoke") / "smoke-dense.json"
    done = subprocess.run(
        [sys.executable, "-m", "mgpu_doctor", "smoke", "--layers", "dense", "--batch-sizes", "32,64",
         "--stall-timeout", "120", "--format", "json"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-3000:]
    path.write_text(done.stdout)
    return path
