from __future__ import annotations

import pytest

from mgpu_doctor.snapshot import Snapshot, load_snapshot
from tests.scenarios import SCENARIOS, path_of


@pytest.fixture
def scenario():
    """Load a recorded snapshot from tests/data by name (through the real loader)."""

    def load(name: str) -> Snapshot:
        assert name in SCENARIOS, name
        return load_snapshot(path_of(name))

    return load
