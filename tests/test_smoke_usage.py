"""The usage scenarios of the smoke suite: mixed precision, XLA, a custom loop, a distributed dataset.

The trainings are real (TensorFlow on virtual CPU devices, the real worker, a forked child per run);
faults come from the documented test-only switch MGPU_DOCTOR_SMOKE_FAULT ("LAYER:FAULT[:N]").
"""

from __future__ import annotations

import os
import sys
import uuid
from importlib import metadata

import pytest

from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.known_issues import run_environment, with_known_issues
from mgpu_doctor.smoke.layers import layer_names
from mgpu_doctor.smoke.plan import SmokeOptions, plan_runs
from mgpu_doctor.smoke.rules import compare_with_single, smoke_outcomes
from mgpu_doctor.smoke.runner import run_suite
from mgpu_doctor.smoke.usage import USAGE_SCENARIOS, usage_scenario_names

PY = sys.executable
ISSUES = load_matrix(bundled_matrix_dir()).issues


def usage_run(scenario: str, status: str = "ok", devices: int = 2, **changes: object) -> SmokeRun:
    fields: dict = {"losses": [0.7, 0.5], **changes}
    return SmokeRun(layer="dense", variant="", devices=devices, device_kind="cpu-virtual",
                    scenario=scenario, status=status, global_batch=64, samples=256, epochs=2, **fields)


def codes(outcome) -> list[str]:
    return [f.code for f in outcome.findings]


# ----------------------------------------------------------------------------- the plan

def test_standard_runs_no_usage_scenario_unless_declared_and_long_runs_every_one_for_every_layer():
    plain = plan_runs(SmokeOptions(), 0)
    assert not [s for s in plain if s.scenario in USAGE_SCENARIOS]
    declared = plan_runs(SmokeOptions(usage=("mixed_precision", "custom_training_loop")), 0)
    usage = [(s.layer, s.scenario, s.devices) for s in declared if s.scenario in USAGE_SCENARIOS]
    assert usage == [("dense", "mixed_precision", 1), ("dense", "mixed_precision", 2),
                     ("dense", "custom_training_loop", 1), ("dense", "custom_training_loop", 2)]
    long = plan_runs(SmokeOptions(level="long"), 0)
    assert {(s.layer, s.scenario) for s in long if s.scenario in USAGE_SCENARIOS} == {
        (layer, scenario) for layer in layer_names() for scenario in usage_scenario_names()}


def test_a_usage_run_is_looked_up_under_its_usage_words_on_full_batches():
    env = run_environment(Environment(versions={"tensorflow": "2.21.0"}), usage_run("custom_training_loop"))
    assert env.usage == ("custom_training_loop", "distribute_dataset") and env.scenario == "even"


# ----------------------------------------------------------------------------- the judgments

def test_a_custom_loop_failure_names_the_known_entry_and_an_unknown_one_is_new():
    env = Environment(versions={"tensorflow": "2.21.0", "keras": "3.15.1"}, backend="tensorflow")
    failed = usage_run("custom_training_loop", "error", error_type="InvalidArgumentError",
                       error_message="Graph execution error:\n\nYou must feed a value for placeholder tensor "
                       "'cond/else/_1/cond/Placeholder' with dtype int32")
    outcome = with_known_issues(smoke_outcomes([failed]), [failed], ISSUES, env)[0]
    assert "smoke.dense.error" in codes(outcome)
    assert "smoke.known-issue.keras-23085-custom-loop-stateful-optimizer-placeholder" in codes(outcome)
    assert "(custom training loop)" in outcome.findings[0].title
    # the same failure of a plain model.fit is not that entry's
    plain = replace(failed, scenario="even")
    assert not [c for c in codes(with_known_issues(smoke_outcomes([plain]), [plain], ISSUES, env)[0])
                if "keras-23085" in c]


def test_xla_under_mirrored_strategy_failing_is_the_known_keras_entry():
    env = Environment(versions={"tensorflow": "2.21.0", "keras": "3.15.1"}, backend="tensorflow")
    failed = usage_run("jit_compile", "error", error_type="InvalidArgumentError",
                       error_message="Graph execution error:\n\nTrying to access resource dense/kernel/replica_1/3 "
                       "located in device /job:localhost/replica:0/task:0/device:CPU:1 from device "
                       "/job:localhost/replica:0/task:0/device:CPU:0")
    outcome = with_known_issues(smoke_outcomes([failed]), [failed], ISSUES, env)[0]
    assert "smoke.known-issue.keras-19005-jit-compile-tf-distribute-variable-device" in codes(outcome)
    single = usage_run("jit_compile", "error", devices=1)  # one device: not that entry's (2 GPUs or more)
    assert not [c for c in codes(with_known_issues(smoke_outcomes([single]), [single], ISSUES, env)[0])
                if "keras-19005" in c]


def test_a_pass_makes_an_entry_that_needs_the_usage_not_reproduced_here():
    """TensorFlow 2.12: the mixed-precision stall entry says "applies if you train with mixed
    precision"; a mixed-precision run that trained on 2 devices answers it, as info."""
    env = Environment(versions={"tensorflow": "2.12.1"})
    runs = [usage_run("mixed_precision", devices=1), usage_run("mixed_precision")]
    outcomes = with_known_issues(smoke_outcomes(runs), runs, ISSUES, env)
    assert not [c for c in codes(outcomes[0]) if c.startswith("smoke.not-reproduced.")]  # 1 device
    found = [f for f in outcomes[1].findings if f.code.startswith("smoke.not-reproduced.")]
    assert "smoke.not-reproduced.tf-60363-mirrored-stall-after-nccl-init-tf212" in [f.code for f in found]
    assert all(f.severity is Severity.INFO for f in found) and outcomes[1].status is CheckStatus.PASSED
    assert any("cannot show here" in line for f in found for line in f.evidence)
    # another TensorFlow: that entry is not about this stack, so nothing is ruled out
    other = with_known_issues(smoke_outcomes(runs), runs, ISSUES, Environment(versions={"tensorflow": "2.21.0"}))
    assert "smoke.not-reproduced.tf-60363-mirrored-stall-after-nccl-init-tf212" not in codes(other[1])


def test_a_skipped_scenario_is_a_skip_with_the_reason_not_a_failure():
    run = usage_run("jit_compile", "skipped", error_message="model.compile of this Keras takes no jit_compile")
    outcome = with_known_issues(smoke_outcomes([run]), [run], ISSUES, Environment())[0]
    assert outcome.status is CheckStatus.SKIPPED and "jit_compile" in (outcome.skip_reason or "")


def test_mixed_precision_loss_agreement_has_its_own_tolerance():
    single, multi = usage_run("mixed_precision", devices=1), usage_run("mixed_precision", losses=[0.7, 0.502])
    (_, judged) = compare_with_single([single, multi])
    assert judged.loss_vs_single and judged.loss_vs_single > 1e-3
    assert "smoke.dense.loss-mismatch" not in codes(smoke_outcomes([single, judged])[1])
    plain = compare_with_single([replace(single, scenario="even"), replace(multi, scenario="even")])
    assert "smoke.dense.loss-mismatch" in codes(smoke_outcomes(plain)[1])


# ----------------------------------------------------------------------------- real trainings

def installed(*names: str) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def fault_env(value: str) -> dict[str, str]:
    return {**os.environ, "MGPU_TEST_MARK": uuid.uuid4().hex, "TF_CPP_MIN_LOG_LEVEL": "2",
            "MGPU_DOCTOR_SMOKE_FAULT": value, "CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.tensorflow
@pytest.mark.slow
@pytest.mark.parametrize("scenario", usage_scenario_names())
def test_each_usage_scenario_trains_1_vs_n_for_real_and_an_injected_fault_is_reported_and_looked_up(scenario):
    """dense 1 vs 2 devices in the scenario, and embedding on 2 devices with a fault in its second
    step: the training is judged like the stock runs, the fault is an error looked up in the matrix."""
    specs = plan_runs(SmokeOptions(layers=("dense",), scenarios=(scenario,),
                                   usage=USAGE_SCENARIOS[scenario].usage), 0)
    specs = [replace(s, index=i) for i, s in enumerate(specs + [replace(specs[-1], layer="embedding")])]
    assert [(s.layer, s.devices) for s in specs] == [("dense", 1), ("dense", 2), ("embedding", 2)]
    suite = run_suite(specs, python=PY, stall_timeout_s=120, env=fault_env("embedding:raise:2"))
    single, multi, faulted = runs = compare_with_single(suite.runs)
    assert single.status == "ok", single
    env = Environment(versions=installed("tensorflow", "keras"), backend="tensorflow")
    outcomes = with_known_issues(smoke_outcomes(runs), runs, ISSUES, env)
    if multi.status == "ok":  # 1 vs N: same data, same seed, the same losses within the tolerance
        assert multi.loss_vs_single is not None and multi.replicas_identical, multi
        assert "smoke.dense.ok" in codes(outcomes[1])
    else:  # this stack cannot train this way on N devices: an error, and the matrix says if it is known
        assert multi.status == "error", multi
        assert [c for c in codes(outcomes[1]) if c.startswith(("smoke.known-issue.", "smoke.not-in-matrix."))]
    assert faulted.status == "error", faulted
    if multi.status == "ok":  # else the stack failed before the fault's step: its own error is shown
        assert "injected fault" in faulted.error_message
    assert "smoke.embedding.error" in codes(outcomes[2])
    assert [c for c in codes(outcomes[2]) if c.startswith(("smoke.known-issue.", "smoke.not-in-matrix."))]
