"""The scaling map and the input-bound probe on real TensorFlow (virtual CPU devices, real worker
and forked children). The slow pipeline is the test-only fault MGPU_DOCTOR_SMOKE_FAULT=LAYER:slow_input."""

from __future__ import annotations

import json
from importlib.resources import files

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.model.smoke_runs import runs_from_report
from mgpu_doctor.renderers.charts import scaling_charts

pytestmark = [pytest.mark.tensorflow, pytest.mark.slow]
SCHEMA = json.loads((files("mgpu_doctor") / "schemas" / "report.schema.json").read_text())


@pytest.fixture(autouse=True)
def _virtual_devices_even_beside_gpus(monkeypatch):
    """These tests are about 2 simulated CPU devices: hide any GPU from the children, so a
    machine with GPUs runs the same plan."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")


def smoke_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["smoke", "--layers", "dense", "--format", "json", *argv])
    report = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(SCHEMA).validate(report)
    return code, report


def test_the_map_trains_every_batch_and_model_size_on_1_and_n_devices(capsys):
    code, report = smoke_json(capsys, "--batch-sizes", "64,256", "--model-sizes", "1,4")
    assert code == 0
    runs = {(r["devices"], r["global_batch"], r["model_size"]): r
            for r in report["smoke_runs"] if r["scenario"] == "even"}
    assert set(runs) == {(d, b, m) for d in (1, 2) for b in (64, 256) for m in (1, 4)}
    assert all(r["status"] == "ok" for r in runs.values())
    # the width multiplier really makes a bigger model: dense 16 -> 32k -> 1
    assert runs[(2, 64, 1)]["parameters"] == 16 * 32 + 32 + 32 + 1
    assert runs[(2, 64, 4)]["parameters"] == 16 * 128 + 128 + 128 + 1
    assert all(runs[(2, b, m)]["speedup"] > 0 for b in (64, 256) for m in (1, 4))
    checks = {c["name"]: c for c in report["checks"]}
    assert "smoke/dense/2xcpu-virtual/even/b256/w4" in checks
    scaling_map = checks["smoke/scaling-map"]
    assert scaling_map["status"] == "info" and [f["code"] for f in scaling_map["findings"]] == ["smoke.scaling-map"]
    table = scaling_map["findings"][0]
    assert "simulated on CPU" in table["title"]
    assert [e.split(":")[0] for e in table["evidence"]] == [
        "dense, 2 devices, size x1, 577 parameters", "dense, 2 devices, size x4, 2,305 parameters"]
    keys = [c.key for c in scaling_charts(runs_from_report(report, "report"))]
    assert keys == ["scaling-speedup-x1", "scaling-efficiency-x1", "scaling-speedup-x4", "scaling-efficiency-x4"]


def test_a_pipeline_too_slow_for_the_devices_is_found_and_a_fast_one_is_not(capsys, monkeypatch):
    monkeypatch.setenv("MGPU_DOCTOR_SMOKE_FAULT", "dense:slow_input")
    code, slow = smoke_json(capsys)
    monkeypatch.delenv("MGPU_DOCTOR_SMOKE_FAULT")
    assert code == 0  # a warning
    checks = {c["name"]: c for c in slow["checks"]}
    probed = checks["smoke/dense/2xcpu-virtual/even/b64"]
    bound = next(f for f in probed["findings"] if f["code"] == "smoke.dense.input-bound")
    assert probed["status"] == "warning" and bound["severity"] == "warning"
    run = next(r for r in slow["smoke_runs"] if r["devices"] == 2 and r["scenario"] == "even")
    # the fault sleeps 30 ms per batch of 64: about 2,100 samples/s at best
    assert run["input_samples_per_s"] < 64 / 0.03
    assert run["compute_samples_per_s"] > run["input_samples_per_s"]
    assert "prefetch(tf.data.AUTOTUNE)" in bound["fix"]
    # the 1-device run is not probed
    assert next(r for r in slow["smoke_runs"] if r["devices"] == 1)["input_samples_per_s"] is None

    code, fast = smoke_json(capsys)
    run = next(r for r in fast["smoke_runs"] if r["devices"] == 2 and r["scenario"] == "even")
    assert run["input_samples_per_s"] > run["compute_samples_per_s"] > 0
    findings = {f["code"] for c in fast["checks"] for f in c["findings"]}
    assert "smoke.dense.input-bound" not in findings and code == 0
