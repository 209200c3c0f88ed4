"""The pytest plugin, run through pytest's own pytester (the plugin loads from its entry point)."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest

from tests.scenarios import path_of

pytest_plugins = ["pytester"]

TESTS = """
import pytest

@pytest.mark.mgpu(gpus=8)
def test_eight(): pass

@pytest.mark.mgpu(gpus=9)
def test_nine(): pass

@pytest.mark.mgpu(gpus=2, layers=["gru"])
def test_gru(): pass

@pytest.mark.mgpu(tensorflow=">=2.16")
def test_tf(): pass

def test_plain(): pass
"""


def test_registered_as_a_pytest11_entry_point():
    assert "mgpu_doctor.pytest_plugin" in [e.value for e in entry_points(group="pytest11")]


def test_marker_skips_what_the_environment_cannot_run(pytester):
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("-rs", "--mgpu-from=" + str(path_of("healthy-8gpu-nvlink")))
    result.assert_outcomes(passed=3, skipped=2)
    result.stdout.fnmatch_lines([
        "SKIPPED*.py:6: mgpu-doctor: 9 GPU(s) required, 8 usable. Fix: Run on a machine*",
        "SKIPPED*.py:9: mgpu-doctor: Layers gru not verified: the smoke trainings did not run. Fix: Run `mgpu-doctor check`*",
    ])


def test_strict_fails_instead(pytester):
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("--mgpu-strict", "--mgpu-from=" + str(path_of("healthy-8gpu-nvlink")))
    result.assert_outcomes(passed=3, failed=2)


def test_header_shows_the_quick_check_summary(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--mgpu-check", "--mgpu-from=" + str(path_of("sick-box")))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "mgpu-doctor (snapshot *sick-box.json, quick): * checks: *, 3 info, 2 warning, 2 failed, * skipped; worst: error",
        "  error: GPU 1 has 3 uncorrected ECC error(s) since the driver loaded",
    ])


def test_inert_unless_asked(pytester):
    pytester.makepyfile("""
        import sys
        def test_nothing_imported():
            assert not [m for m in sys.modules if m.startswith("mgpu_doctor.") and m != "mgpu_doctor.pytest_plugin"]
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "mgpu-doctor (" not in result.stdout.str()  # the plugin line "plugins: mgpu-doctor-X" only


def test_live_quick_check_on_this_machine(pytester):
    """A real quick gather: without a GPU the GPU requirement is never passed, always skipped."""
    from mgpu_doctor.model.unavailable import Unavailable
    from mgpu_doctor.probes.nvml import gather_nvml

    nvml = gather_nvml()
    if not isinstance(nvml, Unavailable) and nvml.gpus:
        pytest.skip("about a machine without a GPU; this one has one")
    pytester.makepyfile("""
        import pytest
        @pytest.mark.mgpu(gpus=1)
        def test_gpu(): pass
    """)
    result = pytester.runpytest("-rs", "--mgpu-check")
    result.stdout.fnmatch_lines(["mgpu-doctor (this machine, quick): * checks: *",
                                 "SKIPPED*mgpu-doctor: *1 GPU(s)*"])
    result.assert_outcomes(skipped=1)


def test_mgpu_from_a_saved_report_verifies_layers_by_its_smoke_runs(pytester, capsys, tmp_path):
    """As `check --from`: the smoke runs a report recorded count for `layers=`."""
    from mgpu_doctor.model.serde import to_jsonable
    from tests.test_diagnose import DENSE_OK, GRU_HANG, saved_report

    path = saved_report(capsys, tmp_path, [DENSE_OK, GRU_HANG])
    assert json.loads(path.read_text())["smoke_runs"][1] == to_jsonable(GRU_HANG)
    pytester.makepyfile("""
        import pytest
        @pytest.mark.mgpu(gpus=2, layers=["dense"])
        def test_dense(): pass
        @pytest.mark.mgpu(gpus=2, layers=["gru"])
        def test_gru(): pass
        @pytest.mark.mgpu(gpus=2, layers=["lstm"])
        def test_lstm(): pass
    """)
    result = pytester.runpytest("-rs", "--mgpu-from=" + str(path))
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED*mgpu-doctor: Required layer(s) failed their smoke training: gru*",
                                 "SKIPPED*mgpu-doctor: Required layer(s) not verified: no smoke training ran for lstm*"])


def test_bad_marker_arguments_fail_the_test_clearly(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.mgpu(gpus="two")
        def test_a(): pass
        @pytest.mark.mgpu(gpu=2)
        def test_b(): pass
    """)
    result = pytester.runpytest("--mgpu-from=" + str(path_of("healthy-8gpu-nvlink")))
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*--require-gpus wants a whole number*", "*takes only gpus=, layers=*"])


def test_bad_mgpu_from_is_a_usage_error(pytester, tmp_path):
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("--mgpu-from=" + str(tmp_path / "none.json"))
    assert result.ret != 0 and "--mgpu-from:" in result.stderr.str() + result.stdout.str()
