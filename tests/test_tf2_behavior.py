"""The `tf2-behavior` check on snapshots in memory (the real TensorFlow 1.15 case is in
test_tf_versions.py)."""

from __future__ import annotations

import pytest

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.model.findings import CheckStatus, Severity
from tests.checking import judge
from tests.scenarios import FakeMachine, gpus, nvml_of, packages, snapshot, tf_view

CHECK = next(c for c in CHECKS if c.name == "tf2-behavior")


def machine(version: str, **env: str):
    return snapshot(nvml_of(FakeMachine(gpus=gpus(2))), tf_view(2, version=version), packages(tensorflow=version),
                    env=env)


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_any_value_but_0_on_tensorflow_1_is_an_info_with_the_fix(value):
    outcome = judge(CHECK, machine("1.15.5", TF2_BEHAVIOR=value))
    [finding] = outcome.findings
    assert outcome.status is CheckStatus.INFO and finding.severity is Severity.INFO
    assert finding.code == "tensorflow.tf2-behavior-on-tf1" and f"TF2_BEHAVIOR={value} turns" in finding.title
    assert "env -u TF2_BEHAVIOR" in finding.fix


@pytest.mark.parametrize("env", [{}, {"TF2_BEHAVIOR": "0"}])
def test_unset_or_0_on_tensorflow_1_passes(env):
    outcome = judge(CHECK, machine("1.15.5", **env))
    assert outcome.status is CheckStatus.PASSED and outcome.findings[0].code == "tensorflow.tf2-behavior-ok"


def test_tensorflow_2_is_skipped_it_always_runs_so():
    outcome = judge(CHECK, machine("2.21.0", TF2_BEHAVIOR="1"))
    assert outcome.status is CheckStatus.SKIPPED and "always runs in its TF2 mode" in outcome.skip_reason
