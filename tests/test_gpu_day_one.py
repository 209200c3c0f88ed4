"""benchmarks/gpu_day_one.py's judgments, without a GPU: the claims from measured numbers, the JUnit
counts, what it scrubs. (The whole script runs in about a minute here: see the README.)"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_day_one.py"


@pytest.fixture(scope="module")
def day_one():
    spec = importlib.util.spec_from_file_location("gpu_day_one", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_day_one"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gpu_day_one", None)


class FakeGpus:
    present = True
    why_not = ""


def command(day_one, before, peak, own=(), rc=0):
    cmd = day_one.Command("devices", ["x"], rc=rc)
    cmd.memory = day_one.Memory(before=before, peak=peak, after=before, own_gpu_pids=list(own))
    return cmd


def test_zero_claim_is_met_only_at_zero_mib_and_no_process_of_its_own(day_one):
    assert day_one.zero_claim(FakeGpus(), command(day_one, [500, 500], [500, 500]), "devices").verdict == "met"
    assert day_one.zero_claim(FakeGpus(), command(day_one, [500, 500], [500, 1012]), "devices").verdict == "MISSED"
    assert day_one.zero_claim(FakeGpus(), command(day_one, [5, 5], [5, 5], own=[42]), "devices").verdict == "MISSED"
    assert day_one.zero_claim(FakeGpus(), command(day_one, [5], [5], rc=3), "devices").verdict == "MISSED"


def test_without_a_gpu_the_claim_is_not_testable_here(day_one):
    class NoGpus:
        present, why_not = False, "no NVIDIA driver"

    claim = day_one.zero_claim(NoGpus(), None, "check --quick")
    assert claim.verdict == "not testable here" and "no NVIDIA driver" in claim.line()


def test_junit_counts(day_one, tmp_path):
    path = tmp_path / "j.xml"
    path.write_text('<testsuites><testsuite tests="5" failures="1" errors="1" skipped="2"/></testsuites>')
    assert day_one.junit_counts(path) == (5, 2, 2)
    assert day_one.junit_counts(tmp_path / "missing.xml") == (0, 0, 0)


def test_jax_against_nvml_from_a_snapshot(day_one, tmp_path):
    path = tmp_path / "snapshot.json"
    gpu = {"platform": "gpu", "device_kind": "NVIDIA H200"}
    path.write_text(json.dumps({"nvml": {"gpus": [{}]}, "jax": {"devices": [gpu], "plugins": {}}}))
    assert day_one.jax_against_nvml(path)[0] == "met"
    path.write_text(json.dumps({"nvml": {"gpus": [{}, {}]}, "jax": {"devices": [gpu], "plugins": {}}}))
    assert day_one.jax_against_nvml(path)[0] == "MISSED"
    path.write_text(json.dumps({"nvml": {}, "jax": {"unavailable": "absent", "detail": "not installed"}}))
    assert day_one.jax_against_nvml(path)[0] == "not testable here"


def test_scrub_removes_uuids_and_whole_word_names_only(day_one, monkeypatch):
    monkeypatch.setattr(day_one.socket, "gethostname", lambda: "vm")
    text = day_one.scrub("GPU-12345678-1234-1234-1234-123456789abc on vm reads nvml")
    assert text == "GPU-<redacted> on <host> reads nvml"


def test_a_junit_file_without_tests_counts_none(day_one, tmp_path):
    path = tmp_path / "j.xml"
    path.write_text('<testsuite tests="3" failures="0" errors="0" skipped="0" hostname="redacted"/>')
    assert day_one.junit_counts(path) == (3, 0, 0)
    path.write_text('<testsuite hostname="<host>"/>')  # not XML: nothing can be counted
    assert day_one.junit_counts(path) == (0, 0, 0)
