"""The `tensorflow-log-level` check, on a snapshot in memory and through `check --from FILE`."""

from __future__ import annotations

import json

import pytest

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.cli import main
from mgpu_doctor.model.findings import CheckStatus, Severity
from tests.checking import judge
from tests.scenarios import with_env

CHECK = next(c for c in CHECKS if c.name == "tensorflow-log-level")


@pytest.mark.parametrize("value,hidden", [("2", "warnings"), ("3", "warnings and errors"), (" 4", "warnings and errors")])
def test_a_level_of_2_or_more_is_an_info_saying_what_it_hides(scenario, value, hidden):
    outcome = judge(CHECK, with_env(scenario("sick-box"), TF_CPP_MIN_LOG_LEVEL=value))
    assert outcome.status is CheckStatus.INFO
    [finding] = outcome.findings
    assert finding.code == "tensorflow.log-level-hides-loading-errors" and finding.severity is Severity.INFO
    assert f"hides TensorFlow's {hidden}," in finding.title and "TF_CPP_MIN_LOG_LEVEL=0" in finding.fix


@pytest.mark.parametrize("env", [{}, {"TF_CPP_MIN_LOG_LEVEL": "0"}, {"TF_CPP_MIN_LOG_LEVEL": "1"}])
def test_a_level_that_shows_warnings_passes(scenario, env):
    outcome = judge(CHECK, with_env(scenario("sick-box"), **env))
    assert outcome.status is CheckStatus.PASSED and outcome.findings[0].code == "tensorflow.log-level-ok"


def test_a_value_that_is_not_a_number_is_skipped_with_the_reason(scenario):
    outcome = judge(CHECK, with_env(scenario("sick-box"), TF_CPP_MIN_LOG_LEVEL="quiet"))
    assert outcome.status is CheckStatus.SKIPPED and "'quiet' is not a number" in outcome.skip_reason


def test_it_works_from_a_saved_snapshot(scenario, tmp_path, capsys):
    path = tmp_path / "snap.json"
    path.write_text(with_env(scenario("sick-box"), TF_CPP_MIN_LOG_LEVEL="3").to_json())
    main(["check", "--from", str(path), "--checks", "tensorflow-log-level", "--format", "json"])
    [check] = json.loads(capsys.readouterr().out)["checks"]
    assert [f["code"] for f in check["findings"]] == ["tensorflow.log-level-hides-loading-errors"]


def test_without_tensorflow_it_is_skipped(scenario):
    outcome = judge(CHECK, with_env(scenario("no-driver-no-tensorflow"), TF_CPP_MIN_LOG_LEVEL="3"))
    assert outcome.status is CheckStatus.SKIPPED and "TensorFlow is not installed" in outcome.skip_reason
