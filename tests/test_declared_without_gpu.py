"""Declared training facts on a machine without GPUs: a declared usage or strategy keeps its known
issues, which say what they need to apply ("when training on at least 2 GPU(s)") instead of being
dropped because this machine has none; a declared GPU count still decides them."""

from __future__ import annotations

import json
from importlib.resources import files

import jsonschema
import pytest

from mgpu_doctor.cli import main
from tests.scenarios import path_of

JIT = "known-issue.keras-19005-jit-compile-tf-distribute-variable-device"
CPU_ONLY = str(path_of("cpu-only-tensorflow"))  # TensorFlow 2.21 (CPU build, no GPU it can use), Keras 3
DECLARED = ("--usage", "jit_compile", "--strategy", "mirrored")
SCHEMA = json.loads((files("mgpu_doctor") / "schemas" / "report.schema.json").read_text())


def known(capsys, *argv: str) -> dict[str, dict]:
    code = main(["check", "--format", "json", *argv])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    data = json.loads(out)
    jsonschema.validate(data, SCHEMA)
    check = next(c for c in data["checks"] if c["name"] == "known-issues")
    return {f["code"]: f for f in check["findings"]}


def applies_when_training_on_gpus(found: dict) -> None:
    assert found["severity"] == "info" and found["title"].startswith("Known issue for these versions: ")
    assert found["condition"]["key"] == "gpus" and found["condition"]["training"] is True
    assert found["condition"]["phrase"] == "when training on at least 2 GPU(s)"
    assert found["condition"]["hint"] == "--train-gpus 2"
    assert "matches: usage jit_compile (declared with --usage)" in found["evidence"]
    assert "matches: strategy mirrored (declared with --strategy)" in found["evidence"]
    assert any(e.startswith("applies when training on at least 2 GPU(s) (this machine has no GPU")
               for e in found["evidence"])


def test_a_declared_usage_and_strategy_keep_their_entry_on_a_machine_without_gpus(capsys, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    applies_when_training_on_gpus(known(capsys, "--from", CPU_ONLY, *DECLARED)[JIT])


def test_a_declared_gpu_count_still_decides_and_nothing_declared_changes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert known(capsys, "--from", CPU_ONLY, *DECLARED, "--train-gpus", "2")[JIT]["severity"] == "warning"
    assert JIT not in known(capsys, "--from", CPU_ONLY, *DECLARED, "--train-gpus", "1")
    # no training described: this machine's count (none) is the training's, as before
    assert JIT not in known(capsys, "--from", CPU_ONLY)


@pytest.mark.tensorflow
def test_check_on_this_machine_keeps_a_declared_jit_compile_under_mirrored(capsys, tmp_path, monkeypatch):
    """The real `check` here, GPUs hidden: the facts come from this machine's own probes."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    found = known(capsys, "--no-smoke", *DECLARED)
    applies_when_training_on_gpus(found[JIT])
