"""Real smoke trainings: TensorFlow on virtual CPU devices, real worker and forked children.

Faults come from the documented test-only switch MGPU_DOCTOR_SMOKE_FAULT ("LAYER:FAULT[:N]").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from importlib.resources import files

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.smoke.plan import LEVELS, SmokeOptions, plan_runs
from mgpu_doctor.smoke.rules import compare_with_single, smoke_outcomes
from mgpu_doctor.smoke.runner import run_suite
from tests.test_signals import launched_with

pytestmark = [pytest.mark.tensorflow, pytest.mark.slow]
PY = sys.executable


def marked_env(**extra: str) -> tuple[dict[str, str], str]:
    mark = uuid.uuid4().hex
    return {**os.environ, "MGPU_TEST_MARK": mark, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}, mark


def processes_with(mark: str) -> list[int]:
    """Live processes (not zombies) whose environment carries the mark: worker or forked runs."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if f"MGPU_TEST_MARK={mark}".encode() not in fh.read():
                    continue
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(pid))
    return found


def test_uneven_final_batch_batchnorm_nan_is_reported_with_the_fix(capsys, tmp_path):
    """The seed write-ups' bug, for real: 257 samples, global batch 64, 2 virtual CPU devices."""
    results = tmp_path / "runs.jsonl"
    junit_file = tmp_path / "smoke.xml"
    code = main(["smoke", "--layers", "batchnorm", "--virtual-devices", "2", "--stall-timeout", "120",
                 "--format", "json", "--junit", str(junit_file), "--results", str(results)])
    out, err = capsys.readouterr()
    # a failure only in the hazard scenario (the even dataset trains) is a warning with its fix,
    # not a failed check on a healthy machine
    assert code == 0
    report = json.loads(out)
    runs = {(r["variant"], r["devices"], r["scenario"]): r for r in report["smoke_runs"]}
    planned = len(plan_runs(SmokeOptions(layers=("batchnorm",)), 0))  # the standard level
    assert report["level"] == "standard" and len(runs) == planned
    assert ("plain", 2, "uneven_final_batch") in runs and ("sync", 2, "even") in runs
    nan = runs[("plain", 2, "uneven_final_batch")]
    assert nan["status"] == "nan" and nan["samples"] == 257 and nan["global_batch"] == 64
    assert nan["device_kind"] == "cpu-virtual"
    # Keras 3 (what tf.keras is with TF 2.21 by default): the others train fine.
    assert {k: r["status"] for k, r in runs.items() if k != ("plain", 2, "uneven_final_batch")} == {
        k: "ok" for k in runs if k != ("plain", 2, "uneven_final_batch")}
    checks = {c["name"]: c for c in report["checks"]}
    finding = checks["smoke/batchnorm-plain/2xcpu-virtual/uneven_final_batch/b64"]["findings"][0]
    assert finding["code"] == "smoke.batchnorm.nan" and finding["severity"] == "warning"
    assert any(e.startswith("only with an uneven final batch") for e in finding["evidence"])
    assert "drop_remainder=True" in finding["fix"] and "synchronized=True" in finding["fix"]
    # Beside it, the matrix's verdict: the entries describe it for TensorFlow 2.0-2.8; it still
    # happens with 2.21 here, and the doctor says so instead of "not in the matrix".
    verdicts = checks["smoke/batchnorm-plain/2xcpu-virtual/uneven_final_batch/b64"]["findings"][1:]
    codes = {v["code"] for v in verdicts}
    assert "smoke.known-issue.tf-mirrored-nan-empty-replica-batch" in codes
    assert not any(c.startswith("smoke.not-in-matrix.") for c in codes)
    still = next(v for v in verdicts if v["code"] == "smoke.known-issue.tf-mirrored-nan-empty-replica-batch")
    assert still["severity"] == "warning" and "still happens with tensorflow 2.21.0 here" in still["title"]
    jsonschema.Draft202012Validator(json.loads(
        (files("mgpu_doctor") / "schemas" / "report.schema.json").read_text())).validate(report)
    # unsynchronized statistics differ from 1 device (info); synchronized ones agree with the
    # 1-device run (one device: plain and synchronized statistics are the same)
    assert checks["smoke/batchnorm-plain/2xcpu-virtual/even/b64"]["status"] == "info"
    assert runs[("sync", 2, "even")]["loss_vs_single"] < 1e-3
    assert runs[("sync", 2, "even")]["replicas_identical"] is True
    assert all(r["framework"].startswith("keras 3") for r in runs.values())
    # progress: a line per run on stderr; --results: a JSON line per run; JUnit: a testcase per run
    assert len([line for line in err.splitlines() if line.startswith("mgpu-doctor: smoke ")]) == planned
    assert [json.loads(line)["status"] for line in results.read_text().splitlines()].count("nan") == 1
    assert len(ET.parse(junit_file).getroot().findall("testcase")) == planned
    assert "simulated on 2 logical CPU devices" in " ".join(report["notes"])
    assert f"Level standard: {planned} smoke training(s)" in " ".join(report["notes"])


def test_hang_is_detected_with_stacks_in_time_and_the_next_run_still_runs():
    env, mark = marked_env(MGPU_DOCTOR_SMOKE_FAULT="dense:hang:2")
    specs = plan_runs(SmokeOptions(layers=("dense", "embedding"), scenarios=("even",)), 0)[1:3]
    assert [(s.layer, s.devices) for s in specs] == [("dense", 2), ("embedding", 1)]
    stall = 6.0
    started: dict[int, float] = {}
    reported: dict[str, float] = {}
    suite = run_suite(specs, python=PY, stall_timeout_s=stall, env=env,
                      on_start=lambda s: started.setdefault(s.index, time.monotonic()),
                      on_run=lambda r: reported.setdefault(r.layer, time.monotonic()))
    hung, after = suite.runs
    assert hung.status == "hang" and after.status == "ok"
    assert suite.workers == 2  # the hung worker was replaced
    assert "on_train_batch_begin" in hung.stacks  # the injected wait, seen from the parent
    assert "Thread" in hung.stacks or "Current thread" in hung.stacks
    detection = reported["dense"] - started[specs[0].index]
    assert stall <= detection < stall + 5, detection  # stall timeout + stacks + kill ladder
    finding = smoke_outcomes([hung])[0].findings[0]
    assert finding.code == "smoke.dense.hang"
    assert any("on_train_batch_begin" in line for line in finding.evidence)
    assert processes_with(mark) == []


def test_crash_error_and_leak_are_caught_and_do_not_poison_the_other_runs():
    """Also: a run killed from outside (conv2d: SIGKILLed once, as on a busy shared machine) is tried
    again and is not a crash of the layer; one that aborts twice is."""
    env, mark = marked_env(MGPU_DOCTOR_SMOKE_FAULT="dense:abort,embedding:leak,attention:raise,conv2d:killed")
    # the long level: enough epochs for a memory slope (the standard level trains too few to tell)
    specs = plan_runs(SmokeOptions(layers=("dense", "embedding", "attention", "conv2d"),
                                   scenarios=("even",), level="long"), 0)
    specs = [s for s in specs if s.global_batch == LEVELS["long"].batch_sizes[0]]
    specs = [s for s in specs if s.devices == 1 and s.model_size == 1]
    suite = run_suite(specs, python=PY, stall_timeout_s=60, env=env)
    crashed, leaky, raised, fine = compare_with_single(suite.runs)
    assert suite.workers == 1  # a crashed run is a dead fork, the worker goes on
    assert crashed.status == "crash" and crashed.signal == "SIGABRT"
    assert crashed.retried_after == "died by SIGABRT"  # tried twice before it counts as a crash
    assert "on_train_batch_begin" in crashed.stderr_tail  # faulthandler's dump of the aborted run
    assert leaky.status == "ok" and leaky.rss_slope_mb_per_epoch is not None
    assert leaky.rss_slope_mb_per_epoch > 40
    assert raised.status == "error" and raised.error_type == "RuntimeError"
    assert "injected fault: raise in a training step" in raised.error_message
    assert fine.status == "ok" and fine.rss_slope_mb_per_epoch < 16
    assert fine.retried_after == "died by SIGKILL" and not raised.retried_after
    codes = [[f.code for f in o.findings] for o in smoke_outcomes([crashed, leaky, raised, fine])]
    assert codes == [["smoke.dense.crash"], ["smoke.embedding.memory-growth", "smoke.embedding.ok"],
                     ["smoke.attention.error"], ["smoke.conv2d.retried", "smoke.conv2d.ok"]]
    assert processes_with(mark) == []


def test_ctrl_c_keeps_the_results_so_far_and_leaves_nothing_running(tmp_path):
    env, mark = marked_env(MGPU_DOCTOR_SMOKE_FAULT="dense:hang:2")
    results = tmp_path / "runs.jsonl"
    proc = subprocess.Popen([PY, "-m", "mgpu_doctor", "smoke", "--layers", "dense", "--results",
                             str(results), "--stall-timeout", "300"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=launched_with())  # Ctrl-C as in a terminal
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (results.exists() and results.read_text().strip()):
        time.sleep(0.2)
    time.sleep(1.0)  # the 2-device run is now blocked in its injected hang
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Smoke training: dense on 1 simulated CPU device(s), even batches" in out  # the finished run
    planned = len(plan_runs(SmokeOptions(layers=("dense",)), 0))
    assert f"Interrupted: 1 of {planned} smoke runs finished." in out
    assert len(results.read_text().splitlines()) == 1
    assert processes_with(mark) == []


def test_check_runs_the_smoke_trainings_unless_quick(capsys):
    code = main(["check", "--layers", "dense", "--stall-timeout", "120", "--format", "json"])
    out, _ = capsys.readouterr()
    assert code in (0, 1)
    report = json.loads(out)
    names = [c["name"] for c in report["checks"]]
    assert "tensorflow-import" in names
    smoke = [c for c in report["checks"] if c["name"].startswith("smoke/")]
    # the standard level: dense has no batch statistics, no uneven scenario to run; its
    # checkpoint round trip runs on N devices
    assert report["level"] == "standard"
    assert [c["name"] for c in smoke] == [
        "smoke/dense/1xcpu-virtual/even/b64", "smoke/dense/2xcpu-virtual/even/b64",
        "smoke/dense/2xcpu-virtual/checkpoint/b64"]
    assert [r["status"] for r in report["smoke_runs"]] == ["ok"] * 3
    reloads = [s for s in report["smoke_runs"][2]["checkpoint"] if s["stage"] == "load"]
    assert {s["load_devices"] for s in reloads} == {1, 2} and all(s["ok"] for s in reloads)
    even = report["smoke_runs"][1]
    assert even["replicas_identical"] is True and even["loss_vs_single"] < 1e-3
    assert even["speedup"] > 0 and even["median_step_s"] > 0
    assert len(even["rss_mb"]) == LEVELS["standard"].epochs and even["rss_slope_mb_per_epoch"] is None
    assert main(["check", "--quick", "--layers", "dense", "--format", "json"]) in (0, 1)
    assert not json.loads(capsys.readouterr().out)["smoke_runs"]


def test_gpus_nvml_sees_but_tensorflow_does_not_are_named_and_smoke_falls_back_to_cpu(capsys):
    import argparse

    from mgpu_doctor.cli import smoke
    from tests.fake_nvml import FakeMachine, FakeNvml, gpus

    args = argparse.Namespace(layers="dense", gpus=None, virtual_devices=2, stall_timeout=120.0,
                              batch_sizes=None, results=None, python=None, format="json",
                              fail_on="error", junit=None, verbose=False)
    code = smoke.run(args, nvml_module=FakeNvml(FakeMachine(gpus=gpus(2))))
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert "NVML sees 2 GPUs but TensorFlow sees 0" in report["notes"][0]
    assert {r["device_kind"] for r in report["smoke_runs"]} == {"cpu-virtual"}


def test_a_startup_hang_of_the_worker_still_gives_its_stack(tmp_path):
    """`import tensorflow` stuck in C code (the classic CUDA-init hang): faulthandler is armed from the
    worker's first line and dumps the stack from C, where a Python-level handler never runs."""
    fake = tmp_path / "site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')  # stuck in C\n")
    env, mark = marked_env(PYTHONPATH=str(tmp_path / "site"))
    specs = plan_runs(SmokeOptions(layers=("dense",), scenarios=("even",)), 0)[:1]
    suite = run_suite(specs, python=PY, stall_timeout_s=60, startup_timeout_s=1.0, env=env)
    [run] = suite.runs
    assert run.status == "error" and run.error_type == "WorkerFailed"
    assert "before TensorFlow was imported" in run.error_message
    assert "tensorflow/__init__.py" in run.stacks
    assert processes_with(mark) == []
