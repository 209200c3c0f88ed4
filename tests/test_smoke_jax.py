"""`smoke --backend jax`: Keras 3 on JAX with keras.distribution.DataParallel, on virtual CPU devices.

Real trainings in real children (a few seconds each, slower on a busy machine); they run where the
test venv has JAX, and under CI, which installs the test extra, always.
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys

import pytest

from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.snapshot import PackageFacts
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.jax_section import run_jax_section, worker_env
from mgpu_doctor.smoke.plan import SmokeOptions, plan_runs
from mgpu_doctor.smoke.request import smoke_backend

HAS_JAX = importlib.util.find_spec("jax") is not None and importlib.util.find_spec("keras") is not None
needs_jax = pytest.mark.skipif(not HAS_JAX and not os.environ.get("CI"), reason="jax is not installed")
ON_JAX = PackageFacts({"jax": "0.10.2", "jaxlib": "0.10.2", "keras": "3.15.1"}, {}, {})


def test_backend_is_jax_where_keras_backend_says_so():
    assert smoke_backend(None, {"KERAS_BACKEND": "jax"}) == "jax"
    assert smoke_backend(None, {"KERAS_BACKEND": " JAX "}) == "jax"
    assert smoke_backend(None, {}) == "tensorflow"
    assert smoke_backend("tensorflow", {"KERAS_BACKEND": "jax"}) == "tensorflow"
    assert smoke_backend("jax", {}) == "jax"


def test_worker_env_splits_the_host_platform():
    specs = plan_runs(SmokeOptions(layers=("dense",), virtual_devices=3, backend="jax"), 0)
    env = worker_env(specs, {"XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8"})
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=3"
    assert env["JAX_PLATFORMS"] == "cpu" and env["KERAS_BACKEND"] == "jax"


def test_worker_env_on_gpus_turns_preallocation_off():
    specs = plan_runs(SmokeOptions(layers=("dense",), backend="jax"), 4)
    env = worker_env(specs, {})
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and "JAX_PLATFORMS" not in env


def test_without_jax_the_jax_smoke_is_skipped(scenario):
    snap = replace(scenario("no-driver-no-tensorflow"), packages=PackageFacts({"keras": "3.15.1"}, {}, {}))
    out = run_jax_section(snap, SmokeOptions(backend="jax"), Interpreter(sys.executable), stall_timeout_s=60)
    assert out.outcomes[0].status is CheckStatus.SKIPPED and "JAX is not installed" in out.outcomes[0].skip_reason


def test_keras_2_cannot_run_on_jax(scenario):
    snap = replace(scenario("no-driver-no-tensorflow"),
                   packages=PackageFacts({"jax": "0.4.30", "keras": "2.15.0"}, {}, {}))
    out = run_jax_section(snap, SmokeOptions(backend="jax"), Interpreter(sys.executable), stall_timeout_s=60)
    assert "needs Keras 3" in out.outcomes[0].skip_reason


def test_sync_batchnorm_is_not_planned_on_jax(scenario, monkeypatch):
    seen = []
    monkeypatch.setattr("mgpu_doctor.smoke.progress.run_suite",
                        lambda specs, **kw: seen.extend(specs) or type("R", (), {"runs": [], "interrupted": False})())
    snap = replace(scenario("no-driver-no-tensorflow"), packages=ON_JAX)
    run_jax_section(snap, SmokeOptions(layers=("batchnorm",), backend="jax"), Interpreter(sys.executable),
                    stall_timeout_s=60, stream=io.StringIO())
    assert seen and {s.variant for s in seen} == {"plain"}
    assert [s.index for s in seen] == list(range(len(seen)))
    assert {s.scenario for s in seen} <= {"even", "uneven_final_batch", "checkpoint"}


@needs_jax
def test_data_parallel_trains_one_and_n_devices_and_reports_a_fault(scenario):
    snap = replace(scenario("no-driver-no-tensorflow"), packages=ON_JAX)
    env = {**os.environ, "MGPU_DOCTOR_SMOKE_FAULT": "attention:nan:2"}
    out = run_jax_section(snap, SmokeOptions(layers=("dense", "attention"), scenarios=("even", "checkpoint"),
                                             backend="jax"),
                          Interpreter(sys.executable), stall_timeout_s=300, stream=io.StringIO(), environ=env)
    runs = {r.name: r for r in out.runs}
    one, two = runs["smoke/dense/1xcpu-virtual/even/b64"], runs["smoke/dense/2xcpu-virtual/even/b64"]
    assert one.status == two.status == "ok", (one.error_message, two.error_message)
    assert "on jax" in two.framework
    assert two.loss_vs_single is not None and two.loss_vs_single < 1e-4  # 1 vs N agree
    assert two.replicas_identical is True
    saved = runs["smoke/dense/2xcpu-virtual/checkpoint/b64"]
    assert saved.status == "ok" and {s.load_devices for s in saved.checkpoint if s.stage == "load"} == {1, 2}
    assert runs["smoke/attention/1xcpu-virtual/even/b64"].status == "ok"
    broken = runs["smoke/attention/2xcpu-virtual/even/b64"]
    assert broken.status == "nan"  # the injected fault is reported, not averaged away
    outcome = next(o for o in out.outcomes if o.name == broken.name)
    assert max(f.severity for f in outcome.findings) >= Severity.ERROR


def test_uneven_batch_failure_on_jax_gets_the_jax_fix():
    from mgpu_doctor.model.smoke_runs import SmokeRun
    from mgpu_doctor.smoke.rules import JAX_UNEVEN_FIX, smoke_outcomes

    common = dict(layer="batchnorm", variant="plain", devices=2, device_kind="cpu-virtual", global_batch=64,
                  framework="keras 3.15.1 on jax 0.10.2")
    runs = [SmokeRun(**common, scenario="even", status="ok", losses=[1.0, 0.5]),  # type: ignore[arg-type]
            SmokeRun(**common, scenario="uneven_final_batch", status="error", samples=257,  # type: ignore[arg-type]
                     error_type="IndivisibleError", error_message="array axis 0 is partitioned 2 times")]
    uneven = next(o for o in smoke_outcomes(runs) if "uneven" in o.name)
    finding = uneven.findings[0]
    assert finding.severity is Severity.WARNING and JAX_UNEVEN_FIX in finding.fix
    assert "synchronized=True" not in finding.fix and "strategy.scope" not in finding.fix


@needs_jax
def test_a_hang_on_n_devices_is_reported_with_the_stacks(scenario):
    snap = replace(scenario("no-driver-no-tensorflow"), packages=ON_JAX)
    env = {**os.environ, "MGPU_DOCTOR_SMOKE_FAULT": "dense:hang:2"}
    out = run_jax_section(snap, SmokeOptions(layers=("dense",), scenarios=("even",), backend="jax"),
                          Interpreter(sys.executable), stall_timeout_s=20, stream=io.StringIO(), environ=env)
    runs = {r.name: r for r in out.runs}
    assert runs["smoke/dense/1xcpu-virtual/even/b64"].status == "ok"
    hung = runs["smoke/dense/2xcpu-virtual/even/b64"]
    assert hung.status == "hang"
    assert "on_train_batch_begin" in hung.stacks  # the forwarded SIGUSR1: the run's own stack
