from __future__ import annotations

import os

import pytest

from mgpu_doctor.snapshot import Snapshot, load_snapshot
from tests.scenarios import SCENARIOS, path_of


@pytest.fixture(autouse=True, scope="session")
def _parse_cache_of_the_session(tmp_path_factory):
    """The doctors the tests start keep parsed matrices in a folder of the session, not in
    the user's ~/.cache (the children inherit the setting)."""
    from mgpu_doctor.matrix.parse_cache import CACHE_ENV

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
