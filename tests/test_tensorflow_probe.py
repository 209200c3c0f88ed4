"""The TensorFlow probe against the real TensorFlow, and against broken ones."""

from __future__ import annotations

import textwrap
from importlib import metadata

import pytest

from mgpu_doctor.model.snapshot import TensorFlowFacts
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.packages import gather_python_and_packages
from mgpu_doctor.probes.tensorflow import gather_tensorflow
from mgpu_doctor.process.interpreter import Interpreter

pytestmark = pytest.mark.tensorflow


@pytest.fixture(scope="module")
def current_packages():
    return gather_python_and_packages(Interpreter.current())[1]


@pytest.fixture(scope="module")
def real_tf(current_packages):
    return gather_tensorflow(Interpreter.current(), current_packages)


def test_real_tensorflow_view(real_tf):
    assert isinstance(real_tf, TensorFlowFacts), real_tf
    assert real_tf.version == metadata.version("tensorflow")
    names = [d.name for d in real_tf.physical_devices]
    assert "/physical_device:CPU:0" in names
    assert real_tf.build_info.get("is_cuda_build") in {"True", "False"}
    assert real_tf.keras_module == "keras"  # TF >= 2.16 uses Keras 3 by default
    assert real_tf.keras_version == metadata.version("keras")
    assert real_tf.import_seconds > 0


def test_no_gpu_here_is_explained_by_tensorflow_itself(real_tf):
    # On this GPU-less machine TensorFlow logs why it found no GPU; the probe keeps that line.
    assert any("cuda" in w.lower() for w in real_tf.warnings), real_tf.warnings


def test_legacy_keras_switch_is_seen(monkeypatch, current_packages):
    pytest.importorskip("tf_keras")
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    tf = gather_tensorflow(Interpreter.current(), current_packages)
    assert isinstance(tf, TensorFlowFacts) and tf.keras_module == "tf_keras"


def fake_tensorflow(tmp_path, monkeypatch, body: str) -> None:
    pkg = tmp_path / "fake" / "tensorflow"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))


def test_import_error_is_a_fact_with_the_real_message(tmp_path, monkeypatch, current_packages):
    fake_tensorflow(tmp_path, monkeypatch, """
        raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory")
    """)
    tf = gather_tensorflow(Interpreter.current(), current_packages)
    assert isinstance(tf, Unavailable) and tf.reason == "failed"
    assert tf.cause == "exception:ImportError"
    assert tf.detail == "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"


def test_hanging_import_is_killed_at_the_timeout(tmp_path, monkeypatch, current_packages):
    fake_tensorflow(tmp_path, monkeypatch, """
        import time
        def load_plugins():
            time.sleep(600)
        load_plugins()
    """)
    tf = gather_tensorflow(Interpreter.current(), current_packages, timeout_s=2)
    assert isinstance(tf, Unavailable) and tf.cause == "timeout"
    assert "load_plugins" in tf.detail  # the stack at the moment it was declared hung


def test_segfault_in_import_is_a_crash_fact(tmp_path, monkeypatch, current_packages):
    fake_tensorflow(tmp_path, monkeypatch, """
        import ctypes
        ctypes.string_at(0)
    """)
    tf = gather_tensorflow(Interpreter.current(), current_packages)
    assert isinstance(tf, Unavailable) and tf.cause == "signal:SIGSEGV"
    assert "Segmentation fault" in tf.detail or "Fatal Python error" in tf.detail


def test_not_installed_needs_no_child(tmp_path):
    from mgpu_doctor.model.snapshot import PackageFacts

    tf = gather_tensorflow(Interpreter("/nonexistent/python"), PackageFacts({}, {}, {}))
    assert isinstance(tf, Unavailable) and tf.reason == "absent"


def test_a_tensorflow_child_that_cannot_start_is_an_error_not_an_import_failure(tmp_path, current_packages,
                                                                                scenario):
    from mgpu_doctor.checks.tensorflow import check_tensorflow_import
    from mgpu_doctor.record import replace

    not_a_program = tmp_path / "python"
    not_a_program.write_bytes(b"\x7fELF\x02garbage")
    not_a_program.chmod(0o755)
    tf = gather_tensorflow(Interpreter(str(not_a_program)), current_packages)
    assert isinstance(tf, Unavailable) and tf.cause == "child-not-started"
    assert "could not be started: [Errno 8] Exec format error" in tf.detail
    [finding] = check_tensorflow_import(replace(scenario("mixed-models"), tensorflow=tf))
    assert finding.code == "tensorflow.probe-not-started" and finding.severity.value == "error"
