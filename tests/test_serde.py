from __future__ import annotations

import json

import pytest

from mgpu_doctor.model.serde import SchemaError, from_jsonable, to_jsonable
from mgpu_doctor.model.snapshot import Snapshot, snapshot_from_data
from mgpu_doctor.model.unavailable import Unavailable, absent, failed
from tests.scenarios import SCENARIOS


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_round_trips_through_json(name):
    snap = SCENARIOS[name]()
    assert snapshot_from_data(json.loads(snap.to_json()), name) == snap


def test_unavailable_keeps_reason_detail_and_cause():
    value = failed("import hung", cause="timeout")
    data = to_jsonable(value)
    assert data == {"unavailable": "failed", "detail": "import hung", "cause": "timeout"}
    assert from_jsonable(Unavailable, data) == value
    assert to_jsonable(absent("x")) == {"unavailable": "absent", "detail": "x"}


def test_schema_error_names_the_field_path():
    data = json.loads(SCENARIOS["sick-box"]().to_json())
    data["nvml"]["gpus"][3]["memory_total_bytes"] = "lots"
    with pytest.raises(SchemaError) as err:
        from_jsonable(Snapshot, data, "snapshot")
    assert err.value.path == "snapshot.nvml.gpus[3].memory_total_bytes"
    assert "expected int" in err.value.message


def test_missing_required_field_is_reported():
    data = json.loads(SCENARIOS["sick-box"]().to_json())
    del data["host"]["kernel"]
    with pytest.raises(SchemaError, match=r"snapshot\.host\.kernel: missing"):
        from_jsonable(Snapshot, data, "snapshot")


def test_booleans_are_not_accepted_as_integers():
    data = json.loads(SCENARIOS["sick-box"]().to_json())
    data["host"]["cpu_count"] = True
    with pytest.raises(SchemaError, match="cpu_count"):
        from_jsonable(Snapshot, data, "snapshot")


def test_unknown_unavailable_reason_is_rejected():
    data = json.loads(SCENARIOS["no-driver-no-tensorflow"]().to_json())
    data["nvml"]["unavailable"] = "vanished"
    with pytest.raises(SchemaError, match="unknown reason"):
        from_jsonable(Snapshot, data, "snapshot")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_file_is_what_its_builder_writes_now(name):
    """tests/data/NAME.json is written by tests/scenarios.py (`python -m tests.scenarios`): a file
    from an older builder shows its readers (the README's example) an older snapshot than the tests'."""
    from tests.scenarios import path_of

    assert json.loads(path_of(name).read_text()) == json.loads(SCENARIOS[name]().to_json()), (
        f"{path_of(name).name} is stale: run `python -m tests.scenarios`, then regenerate the goldens")
