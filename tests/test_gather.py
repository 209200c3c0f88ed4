"""Gathering a whole snapshot: what is announced on stderr matches what really happens."""

from __future__ import annotations

from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.gather import GatherOptions, gather_snapshot
from mgpu_doctor.process.interpreter import Interpreter
from tests.fake_nvml import FakeMachine, FakeNvml
from tests.test_packages_probe import base_python


def test_no_tensorflow_import_is_announced_when_none_is_installed():
    steps: list[str] = []
    snap = gather_snapshot(
        GatherOptions(Interpreter(base_python()), quick=True, nvml_module=FakeNvml(FakeMachine())),
        lambda step, slow=False: steps.append(step),
    )
    assert isinstance(snap.tensorflow, Unavailable) and snap.tensorflow.reason == "absent"
    assert not any("TensorFlow" in s for s in steps), steps
