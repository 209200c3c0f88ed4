"""`check --quick` and the standard level say the same about every fact both show.

The quick level never imports TensorFlow, so what it knows about the build it reads from the
installed distributions and the tested-build table; where TensorFlow, imported, says more (a
CPU-only build), the quick level must not claim what the standard level cannot tell.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.model.unavailable import skipped
from tests.fake_nvml import FakeMachine
from tests.scenarios import gpus, nvml_of, packages, snapshot, tf_view

REPO = Path(__file__).resolve().parents[1]
NOT_IMPORTED = skipped("--quick: TensorFlow not imported")


@pytest.mark.parametrize("installed,cpu_only", [
    ({"tensorflow": "", "tensorflow-cpu": "2.21.0"}, True),
    ({"tensorflow": "", "tf-nightly-cpu": "2.22.0.dev20261101"}, True),
    ({"tensorflow": "2.21.0"}, False),
    ({"tensorflow": "2.21.0", "tensorflow-cpu": "2.21.0"}, False),  # which one wins is not known
])
def test_a_cpu_only_distribution_is_a_cpu_only_build_before_the_import(installed, cpu_only):
    env = resolve(snapshot(nvml_of(FakeMachine(gpus=gpus(2))), NOT_IMPORTED, packages(**installed)))
    assert env.cpu_only_build is cpu_only
    assert env.built_cudnn.known is not cpu_only
    if cpu_only:
        assert "CPU-only build" in env.built_cudnn.missing.detail  # type: ignore[union-attr]


def test_the_imported_tensorflow_decides_over_the_distribution():
    cpu_wheel = packages(tensorflow="", **{"tensorflow-cpu": "2.21.0"})
    assert resolve(snapshot(nvml_of(FakeMachine(gpus=gpus(2))), tf_view(0, built_with_cuda=False), cpu_wheel)).cpu_only_build
    assert not resolve(snapshot(nvml_of(FakeMachine(gpus=gpus(2))), tf_view(0), cpu_wheel)).cpu_only_build


def disagreements(quick: dict, standard: dict) -> tuple[int, dict[str, tuple[tuple[str, str], ...]]]:
    """How many finding codes both reports show, and those whose severity or title differ. A title
    is compared without its parenthesised origin ("(predicted from TensorFlow's version: ...)"
    against "(imported by the TensorFlow child: ...)"); the imported TensorFlow may name a version
    more precisely ("Keras 2" against "Keras 2.2.4-tf"), never another one."""
    def facts(report: dict) -> dict[str, tuple[str, str]]:
        return {f["code"]: (f["severity"], re.sub(r" \(.*\)$", "", f["title"]))
                for c in report["checks"] for f in c["findings"]}

    def agree(a: tuple[str, str], b: tuple[str, str]) -> bool:
        short, long = sorted((a[1], b[1]), key=len)
        return a[0] == b[0] and (short == long or long.startswith(short + "."))
    q, s = facts(quick), facts(standard)
    both = q.keys() & s.keys()
    return len(both), {k: (q[k], s[k]) for k in sorted(both) if not agree(q[k], s[k])}


def levels(python: str) -> tuple[dict, dict]:
    run = [sys.executable, "-m", "mgpu_doctor", "check", "--python", python, "--format", "json"]
    quick = subprocess.run([*run, "--quick"], capture_output=True, text=True, timeout=120, cwd=REPO,
                           stdin=subprocess.DEVNULL)
    standard = subprocess.run([*run, "--no-smoke"], capture_output=True, text=True, timeout=600, cwd=REPO,
                              stdin=subprocess.DEVNULL)
    return json.loads(quick.stdout), json.loads(standard.stdout)


@pytest.mark.slow
@pytest.mark.tensorflow
def test_quick_and_standard_agree_on_this_machines_interpreter():
    pytest.importorskip("tensorflow")
    quick, standard = levels(sys.executable)
    assert standard["level"] != quick["level"]
    shared, differ = disagreements(quick, standard)
    assert shared, "no finding in common"
    assert not differ
