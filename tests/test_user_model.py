"""`--model MODULE:FUNCTION`: the user's own model, built and read in a real child process.

The model module is tests/user_models/gru_mixed.py (GRU, Dropout, a custom metric, mixed_float16)
with model functions that raise, hang and return no model.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mgpu_doctor.checks import known_issues
from mgpu_doctor.cli import main
from mgpu_doctor.findings import Severity
from mgpu_doctor.interpreter import Interpreter
from mgpu_doctor.probes.user_model import ModelObservation, ModelRequest, observe_model
from mgpu_doctor.query import resolve_query
from mgpu_doctor.training.apply import with_training
from mgpu_doctor.training.observed import layer_words, model_outcome, usage_words, with_observed
from mgpu_doctor.training.profile import TrainingProfile

USER_MODELS = str(Path(__file__).parent / "user_models")


def observe(function: str, timeout_s: float = 240.0, data: str = "") -> ModelObservation:
    return observe_model(ModelRequest(f"gru_mixed:{function}", data=data, path=USER_MODELS,
                                      timeout_s=timeout_s), Interpreter.current())


@pytest.fixture(scope="module")
def seen() -> ModelObservation:
    return observe("build", data="gru_mixed:data")


# ----------------------------------------------------------------------------- pure mapping

def test_layer_classes_map_to_the_matrix_words_nested_custom_and_synchronized_included():
    facts = {"layers": [
        {"class": "Bidirectional", "builtin": True}, {"class": "LSTMCell", "builtin": True},
        {"class": "BatchNormalization", "builtin": True, "synchronized": True},
        {"class": "Functional", "builtin": True, "model": True},
        {"class": "MyDense", "builtin": False, "base": "Dense"},
        {"class": "Encoder", "builtin": False, "model": True, "base": "Model"},
        {"class": "GlobalAveragePooling1D", "builtin": True}, {"class": "InputSpecThing", "builtin": True},
    ]}
    assert layer_words(facts) == ("bidirectional", "lstm", "sync_batchnorm", "custom_layer", "dense", "pooling")


def test_usage_words_and_what_the_observation_decides():
    facts = {"policies": ["float32"], "jit_compile": True, "run_eagerly": False,
             "optimizer": {"class": "Adam", "loss_scale": False, "legacy": True}, "metrics": [],
             "layers": [], "shared": ["Functional"], "inputs": [{"dtype": "string", "shape": [None]}],
             "outputs": 2, "loss_dict": True}
    usage, decided = usage_words(facts, {})
    assert set(usage) == {"jit_compile", "legacy_optimizer", "shared_submodel", "string_input", "named_outputs"}
    assert {"mixed_precision", "run_eagerly", "custom_metric", "sparse_input"} <= set(decided) - set(usage)
    # a fact the child could not read decides nothing
    _, unread = usage_words({}, {})
    assert unread == ()


# ----------------------------------------------------------------------------- the real child

@pytest.mark.tensorflow
@pytest.mark.slow
def test_the_model_is_built_under_the_strategy_and_read_as_observed_facts(seen):
    assert seen.stage == "done", seen
    profile = with_observed(TrainingProfile(), seen)
    assert {"gru", "dropout", "dense"} <= set(profile.observed.layers)
    assert {"mixed_precision", "custom_metric"} <= set(profile.observed.usage)
    assert {"jit_compile", "run_eagerly", "string_input"} <= set(profile.usage_checked) - set(profile.observed.usage)
    assert seen.data == {"kind": "arrays", "string": False, "sparse": False, "dict_labels": False}
    outcome = model_outcome(seen)
    assert outcome.findings[0].code == "user-model.observed"
    assert "PeakAbsoluteError (custom)" in " ".join(outcome.findings[0].evidence)
    # only names leave the child: no weights, values or user-given names
    text = json.dumps(seen.facts)
    assert "peak_absolute_error" not in text and "gru_mixed" not in text


@pytest.mark.tensorflow
@pytest.mark.slow
def test_observed_facts_match_the_entries_that_need_them(seen):
    """TensorFlow 2.12: the stall with mixed precision under MirroredStrategy needs the usage the
    model shows; observed, it no longer says "applies if you train with mixed precision"."""
    env, _ = resolve_query(["tensorflow==2.12.0", "gpus=2"])
    before = {f.code: f for f in known_issues.check_known_issues(env)}
    after = {f.code: f for f in known_issues.check_known_issues(
        with_training(env, with_observed(TrainingProfile(), seen)))}
    code = "known-issue.tf-60363-mirrored-stall-after-nccl-init-tf212"
    assert any("mixed precision" in line for line in before[code].evidence)
    assert any(line.startswith("matches: usage mixed_precision") and "observed" in line
               for line in after[code].evidence)
    assert not any("if you train with mixed precision" in line for line in after[code].evidence)
    # an entry that needs a usage the model was seen without drops out (jit_compile, TF 2.12)
    assert "known-issue.tfkeras-99-embedding-xla-mirrored-collectivegather" not in after


@pytest.mark.tensorflow
@pytest.mark.slow
def test_check_model_shows_the_observed_facts_and_stores_them(capsys):
    code = main(["check", "--no-smoke", "--checks", "known-issues", "--model", "gru_mixed:build",
                 "--model-path", USER_MODELS, "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    assert set(out["training"]["observed"]["usage"]) >= {"mixed_precision", "custom_metric"}
    assert out["training"]["observed_from"]["layers"] == "model: gru_mixed:build"
    model = next(c for c in out["checks"] if c["name"] == "model")
    assert model["findings"][0]["code"] == "user-model.observed"


@pytest.mark.tensorflow
@pytest.mark.slow
@pytest.mark.parametrize(("function", "code", "words"), [
    ("raises", "user-model.build-failed", ["FileNotFoundError", "the training data under /data/corpus is not mounted",
                                      "gru_mixed.py", "in raises"]),
    ("not_a_model", "user-model.not-a-model", ["returned a dict, not a Keras model"]),
    ("no_such_function", "user-model.import-failed", ["AttributeError", "no_such_function"]),
])
def test_a_model_function_that_fails_is_a_finding_in_its_own_words(function, code, words):
    observation = observe(function)
    (finding,) = model_outcome(observation).findings
    assert finding.code == code and finding.severity is Severity.ERROR
    text = "\n".join([finding.title, *finding.evidence])
    assert all(w in text for w in words), text
    assert "model_probe.py" not in text  # the user's stack, not the doctor's


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_model_function_that_hangs_is_stopped_with_its_stacks():
    observation = observe("hangs", timeout_s=40.0)
    (finding,) = model_outcome(observation).findings
    assert finding.code == "user-model.hang" and "--model-timeout" in finding.fix
    assert "hangs" in "\n".join(finding.evidence)  # the user's frame, where it waited


@pytest.mark.parametrize(("argv", "message"), [
    (["--data", "m:f"], "--data needs --model"),
    (["--model", "no_colon"], "--model takes MODULE:FUNCTION"),
    (["--model", "m:f", "--model-path", "/nonexistent/dir"], "--model-path /nonexistent/dir: no such directory"),
    (["--model", "m:f", "--model-timeout", "0"], "--model-timeout must be"),
])
def test_bad_model_options_are_one_line_and_exit_2(capsys, argv, message):
    assert main(["check", "--quick", *argv]) == 2
    assert message in capsys.readouterr().err


def test_from_and_model_cannot_go_together(capsys, tmp_path):
    assert main(["check", "--from", str(Path(__file__).parent / "data" / "healthy-8gpu-nvlink.json"),
                 "--model", "m:f"]) == 2
    assert "--from and --model" in capsys.readouterr().err


def test_quick_builds_no_model(capsys):
    main(["check", "--quick", "--model", "gru_mixed:build", "--model-path", USER_MODELS, "--format", "json"])
    model = next(c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "model")
    assert model["status"] == "skipped" and "--quick" in model["skip_reason"]


def test_an_observation_that_failed_adds_no_fact():
    failed = ModelObservation(ModelRequest("m:f"), "build", error_type="ValueError", error_message="x")
    assert with_observed(TrainingProfile(), failed) == TrainingProfile()
    assert replace(failed, stage="done").seen
