"""Where TensorFlow's documentation table and the real wheel disagree on what it was built with,
the wheel wins: tensorflow-gpu 1.15.0 refuses a cuDNN 7.4.1 runtime, "source was compiled with:
7.6.0" (tensorflow/tensorflow#35376), although the table says 7.4."""

from __future__ import annotations

from mgpu_doctor.diagnose import query
from mgpu_doctor.matrix.compat_tables import bundled_tensorflow_table
from mgpu_doctor.model.findings import Severity


def test_tensorflow_1_15_was_built_with_cudnn_7_6_as_its_own_log_says():
    row = bundled_tensorflow_table().build_for("1.15.0")
    assert row is not None and (row.cuda, row.cudnn) == ("10.0", "7.6")


def test_cudnn_7_4_with_tensorflow_1_15_is_the_error_the_wheel_prints_and_7_6_is_not():
    def worst(cudnn: str) -> Severity:
        report = query(["tensorflow==1.15.0", "cuda==10.0", f"cudnn=={cudnn}", "driver==410.48"])
        return max((f.severity for f in report.findings if f.code.startswith("libraries.")), default=Severity.OK)

    assert worst("7.4.1") is Severity.ERROR
    assert worst("7.6.0") < Severity.WARNING
