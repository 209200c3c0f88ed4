"""`snapshot-values`: a snapshot holding values no machine has is said to be damaged, field by field."""

from __future__ import annotations

import json

from mgpu_doctor import record as records
from mgpu_doctor.checks.snapshot_values import check_snapshot_values
from mgpu_doctor.cli import main
from tests.scenarios import SCENARIOS, path_of


def test_every_recorded_scenario_is_possible():
    for name, build in SCENARIOS.items():
        assert check_snapshot_values(build()) == [], name


def test_negative_sizes_counts_and_a_temperature_below_absolute_zero_are_named():
    snap = SCENARIOS["healthy-8gpu-nvlink"]()
    gpus = list(snap.nvml.gpus)
    gpus[0] = records.replace(gpus[0], memory_total_bytes=-80 * 2**30, temperature_c=-300)
    gpus[1] = records.replace(gpus[1], temperature_c=-20, pcie_width_current=-16)  # -20 °C is possible
    snap = records.replace(snap, nvml=records.replace(snap.nvml, gpus=gpus),
                               host=records.replace(snap.host, cpu_count=-4))
    [finding] = check_snapshot_values(snap)
    assert finding.code == "snapshot.damaged" and finding.severity.value == "error"
    assert finding.title == ("The snapshot is damaged: snapshot.host.cpu_count holds a value no machine "
                             "has (4 such fields)")
    assert finding.evidence == [
        "snapshot.host.cpu_count: -4 (below 0)",
        "snapshot.nvml.gpus[0].memory_total_bytes: -85899345920 (below 0)",
        "snapshot.nvml.gpus[0].temperature_c: -300 (below absolute zero)",
        "snapshot.nvml.gpus[1].pcie_width_current: -16 (below 0)",
    ]


def test_check_from_a_damaged_snapshot_says_so(tmp_path, capsys):
    data = json.loads(path_of("healthy-8gpu-nvlink").read_text())
    data["nvml"]["gpus"][2]["memory_total_bytes"] = -85899345920
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data))
    assert main(["check", "--from", str(path), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    [check] = [c for c in report["checks"] if c["name"] == "snapshot-values"]
    assert check["findings"][0]["code"] == "snapshot.damaged"
    assert "snapshot.nvml.gpus[2].memory_total_bytes: -85899345920 (below 0)" in check["findings"][0]["evidence"]
