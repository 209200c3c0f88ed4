"""The checkpoint scenarios: save and reload a model trained on N devices, resume after a kill.

The trainings are real (TensorFlow on virtual CPU devices, the real worker, each stage a fresh
forked process); faults come from the documented test-only switch MGPU_DOCTOR_CHECKPOINT_FAULT.
"""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.match import Environment
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.checkpoint import RELOAD_TOLERANCE, CheckpointStep, checkpoint_status
from mgpu_doctor.smoke.known_issues import run_environment, with_known_issues
from mgpu_doctor.smoke.layers import layer_names
from mgpu_doctor.smoke.plan import LEVELS, SmokeOptions, plan_runs
from mgpu_doctor.smoke.rules import smoke_outcomes
from mgpu_doctor.smoke.runner import run_suite

PY = sys.executable


def ckpt_run(status: str, steps: list[CheckpointStep], scenario: str = "checkpoint") -> SmokeRun:
    return SmokeRun(layer="dense", variant="", devices=2, device_kind="cpu-virtual", scenario=scenario,
                    status=status, global_batch=64, samples=256, epochs=2, checkpoint=steps)


def load(fmt: str, devices: int, diff: float | None = 0.0, ok: bool = True, error: str = "") -> CheckpointStep:
    return CheckpointStep(format=fmt, stage="load", load_devices=devices, ok=ok, max_abs_diff=diff,
                          max_abs_reference=0.9, error=error)


SAVED = [CheckpointStep(format=f, stage="save", ok=True) for f in ("keras", "weights", "tf_checkpoint")]


def test_standard_plans_one_checkpoint_round_trip_and_long_every_layer_and_the_resume():
    standard = [s for s in plan_runs(SmokeOptions(), 0) if s.scenario in ("checkpoint", "resume")]
    assert [(s.layer, s.scenario, s.devices) for s in standard] == [("dense", "checkpoint", 2)]
    long = plan_runs(SmokeOptions(level="long"), 0)
    assert {s.layer for s in long if s.scenario == "checkpoint"} == set(layer_names())
    assert [s.layer for s in long if s.scenario == "resume"] == ["dense"]
    assert all(s.epochs == LEVELS["long"].epochs >= 2 for s in long if s.scenario == "resume")
    # a test that narrows the scenarios plans none
    assert not [s for s in plan_runs(SmokeOptions(scenarios=("even",)), 0) if s.scenario == "checkpoint"]


@pytest.mark.parametrize(("steps", "status", "code"), [
    (SAVED + [load("keras", 1), load("keras", 2, diff=RELOAD_TOLERANCE / 2)], "ok", "smoke.dense.ok"),
    ([replace(SAVED[0], ok=False, error="ValueError: cannot save")] + SAVED[1:] + [load("weights", 1)],
     "save-failed", "smoke.dense.save-failed"),
    (SAVED + [load("keras", 1), load("weights", 2, ok=False, error="TypeError: unsupported operand")],
     "load-failed", "smoke.dense.load-failed"),
    (SAVED + [load("keras", 1), load("tf_checkpoint", 2, diff=0.01)], "reload-differs",
     "smoke.dense.reload-differs"),
])
def test_checkpoint_steps_make_the_status_and_the_finding(steps, status, code):
    assert checkpoint_status("ok", steps) == status
    outcome = smoke_outcomes([ckpt_run(status, steps)])[0]
    assert outcome.name == "smoke/dense/2xcpu-virtual/checkpoint/b64"
    assert [f.code for f in outcome.findings] == [code]


def test_a_format_the_user_model_cannot_use_without_a_strategy_either_is_info_not_a_failure():
    """HDF5 and a subclassed model in Keras 2: the save fails on one device without a strategy too
    (the child's control), so the run passes with the other formats and says which one and why."""
    limit = "NotImplementedError: Saving the model to HDF5 format requires the model to be a Functional model"
    h5 = CheckpointStep(format="h5", stage="save", ok=False, error=limit, model_limit=limit)
    custom = "TypeError: Unable to revive model from config"
    reload = load("keras", 2, ok=False, error=custom)
    steps = SAVED + [h5, load("weights", 1), replace(reload, model_limit=custom)]
    assert checkpoint_status("ok", steps) == "ok"
    findings = {f.code: f for f in smoke_outcomes([replace(ckpt_run("ok", steps), layer="model")])[0].findings}
    ok, limited = findings.pop("smoke.model.ok"), findings.pop("smoke.model.format-unusable")
    assert not findings and "formats: weights, tf_checkpoint" in ok.evidence
    assert limited.code == "smoke.model.format-unusable" and limited.severity is Severity.INFO
    assert "HDF5" in limited.title and "without a strategy either" in limited.title
    assert f"h5 (one device, no strategy): {limit}" in limited.evidence
    assert f"keras (one device, no strategy): {custom}" in limited.evidence
    # the same failures where the control worked: the devices' doing, errors as before
    assert checkpoint_status("ok", SAVED + [replace(h5, model_limit="")]) == "save-failed"
    assert checkpoint_status("ok", SAVED + [reload]) == "load-failed"


def test_resume_that_starts_from_scratch_or_ends_elsewhere_fails():
    good = CheckpointStep(format="backup_and_restore", stage="resume", load_devices=2, ok=True,
                          max_abs_diff=0.0, max_abs_reference=0.4, resumed_at_epoch=1, killed_in_epoch=2)
    assert checkpoint_status("ok", [good]) == "ok"
    for bad in (replace(good, resumed_at_epoch=0), replace(good, max_abs_diff=0.05)):
        assert checkpoint_status("ok", [bad]) == "resume-failed"
        finding = smoke_outcomes([ckpt_run("resume-failed", [bad], "resume")])[0].findings[0]
        assert finding.code == "smoke.dense.resume-failed"
    scratch = smoke_outcomes([ckpt_run("resume-failed", [replace(good, resumed_at_epoch=0)], "resume")])
    assert "began at epoch 1, not at 2" in " ".join(scratch[0].findings[0].evidence)


def test_a_failed_reload_is_looked_up_in_the_matrix_with_its_usage():
    """The load_weights entry of TensorFlow 2.15 explains a load failure there; not a plain fit."""
    # the error as the thread shows it (tensorflow#62831): the entry's signature names it
    error = "TypeError: unsupported operand type(s) for /: 'Dataset' and 'int'"
    run = ckpt_run("load-failed", SAVED + [load("weights", 2, ok=False, error=error)])
    env = Environment(versions={"tensorflow": "2.15.1"}, gpus=2)
    assert set(run_environment(env, run).usage) == {"save_model", "load_weights", "checkpoint"}
    outcomes = with_known_issues(smoke_outcomes([run]), [run], load_matrix(bundled_matrix_dir()).issues, env)
    codes = [f.code for f in outcomes[0].findings]
    assert "smoke.known-issue.tf-mirrored-load-weights-typeerror-tf215" in codes
    # far past its last report (2.15.x), no fix known: the line it prints makes it a possible cause,
    # at info, saying so; never a warning
    newer = Environment(versions={"tensorflow": "2.21.0"}, gpus=2)
    found = {f.code: f for f in with_known_issues(smoke_outcomes([run]), [run],
                                                  load_matrix(bundled_matrix_dir()).issues, newer)[0].findings}
    later = found["smoke.known-issue.tf-mirrored-load-weights-typeerror-tf215"]
    assert later.severity is Severity.INFO and "a possible cause of its error" in later.title
    assert "not known: tensorflow 2.21.0: reported up to 2.15.x, no fix known" in later.evidence


def test_replicas_that_kept_their_own_statistics_explain_a_reload_that_differs():
    """Plain BatchNormalization on N devices: the reload differs because the replicas' moving
    statistics drifted apart, not because a variable was lost; one story, with the known issue."""
    steps = SAVED + [load("keras", 1, diff=0.06), load("keras", 2, diff=0.06)]
    run = replace(ckpt_run("reload-differs", steps), layer="batchnorm", variant="plain",
                  replica_state_max_abs_diff=0.02)
    finding = smoke_outcomes([run])[0].findings[0]
    assert finding.code == "smoke.batchnorm.reload-differs" and finding.severity is Severity.WARNING
    assert "replicas kept different moving mean and variance" in finding.title
    assert "synchronized=True" in finding.fix and "not saved" not in finding.fix
    assert "https://github.com/tensorflow/tensorflow/issues/46488" in finding.links
    # the same differences without diverged replica state: a variable was not saved or restored
    lost = smoke_outcomes([replace(run, replica_state_max_abs_diff=0.0)])[0].findings[0]
    assert lost.severity is Severity.ERROR and "not saved or not restored" in lost.fix
    env = Environment(versions={"tensorflow": "2.21.0"}, gpus=2)
    outcome = with_known_issues(smoke_outcomes([run]), [run], load_matrix(bundled_matrix_dir()).issues, env)[0]
    codes = [f.code for f in outcome.findings]
    assert "smoke.known-issue.tf-46488-batchnorm-replica-statistics-saved" in codes
    # save errors of old releases are not a different number today: no "still happens" story
    assert not [c for c in codes if "tf-36477" in c or "tf-31531" in c]


# ----------------------------------------------------------------------------- real trainings

def fault_env(value: str) -> dict[str, str]:
    return {**os.environ, "MGPU_TEST_MARK": uuid.uuid4().hex, "TF_CPP_MIN_LOG_LEVEL": "2",
            "MGPU_DOCTOR_CHECKPOINT_FAULT": value}


@pytest.mark.tensorflow
@pytest.mark.slow
def test_round_trip_in_every_format_on_1_and_n_devices_and_a_drift_is_caught():
    specs = [s for s in plan_runs(SmokeOptions(layers=("dense", "embedding"), level="long",
                                               scenarios=("checkpoint",)), 0)]
    specs = [replace(s, epochs=2, index=i) for i, s in enumerate(specs)]
    suite = run_suite(specs, python=PY, stall_timeout_s=120, env=fault_env("embedding:drift"))
    fine, drifted = suite.runs
    assert fine.status == "ok", fine
    formats = {s.format for s in fine.checkpoint}
    assert {"keras", "weights", "tf_checkpoint"} <= formats
    if fine.framework.startswith("tf_keras"):
        assert {"savedmodel", "h5"} <= formats
    assert {s.load_devices for s in fine.checkpoint if s.stage == "load"} == {1, 2}
    assert all(s.ok and s.max_abs_diff is not None and not s.differs for s in fine.checkpoint if s.stage == "load")
    assert drifted.status == "reload-differs"
    codes = [f.code for o in smoke_outcomes([fine, drifted]) for f in o.findings]
    assert codes == ["smoke.dense.ok", "smoke.embedding.reload-differs"]


@pytest.mark.tensorflow
@pytest.mark.slow
def test_plain_batchnorm_reloads_differently_for_its_replicas_statistics_and_sync_does_not():
    specs = plan_runs(SmokeOptions(layers=("batchnorm",), level="long", scenarios=("checkpoint",)), 0)
    specs = [replace(s, epochs=2, index=i) for i, s in enumerate(specs)]
    assert [s.variant for s in specs] == ["plain", "sync"]
    plain, sync = run_suite(specs, python=PY, stall_timeout_s=120, env=fault_env("")).runs
    assert plain.status == "reload-differs" and plain.replica_state_max_abs_diff > 0
    assert sync.status == "ok" and sync.replica_state_max_abs_diff == 0.0
    # the reloads on 1 and on N devices agree with each other: the save kept one version
    diffs = {s.max_abs_diff for s in plain.checkpoint if s.stage == "load"}
    assert max(diffs) - min(diffs) < 1e-5
    finding = smoke_outcomes([plain])[0].findings[0]
    assert finding.severity is Severity.WARNING and "synchronized=True" in finding.fix


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_training_killed_in_epoch_2_resumes_from_its_backup_and_ends_with_the_same_weights():
    """And one whose backup is gone (the fault "forget") starts again at epoch 1: caught, although a
    seeded training from scratch ends with the very same weights."""
    spec = next(s for s in plan_runs(SmokeOptions(layers=("dense",), level="long"), 0) if s.scenario == "resume")
    specs = [replace(spec, epochs=3, index=0), replace(spec, epochs=3, index=1, layer="embedding")]
    suite = run_suite(specs, python=PY, stall_timeout_s=120, env=fault_env("embedding:forget"))
    resumed, forgot = suite.runs
    assert resumed.status == "ok", resumed
    step = resumed.checkpoint[0]
    assert (step.killed_in_epoch, step.resumed_at_epoch) == (2, 1)
    assert step.max_abs_diff is not None and step.max_abs_diff <= step.tolerance
    assert forgot.status == "resume-failed" and forgot.checkpoint[0].resumed_at_epoch == 0
    assert suite.workers == 1  # the kill is a stage's, not the run's


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_stage_that_hangs_is_a_hang_with_the_stage_s_own_stacks():
    spec = next(s for s in plan_runs(SmokeOptions(layers=("dense",)), 0) if s.scenario == "checkpoint")
    suite = run_suite([replace(spec, index=0)], python=PY, stall_timeout_s=8, env=fault_env("dense:hang"))
    (hung,) = suite.runs
    assert hung.status == "hang"
    assert "save_stage" in hung.stacks and "on_train_batch_begin" in hung.stacks  # not the wait above it
    assert smoke_outcomes([hung])[0].findings[0].code == "smoke.dense.hang"
