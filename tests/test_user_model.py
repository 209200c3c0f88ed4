"""`--model MODULE:FUNCTION`: the user's own model, built and read in a real child process.

The model module is tests/user_models/gru_mixed.py (GRU, Dropout, a custom metric, mixed_float16)
with model functions that raise, hang and return no model; tests/user_models/model_kinds.py holds
the other kinds of model people write (subclassed, built or not, with its own train_step; two inputs).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from mgpu_doctor.checks import known_issues
from mgpu_doctor.cli import main
from mgpu_doctor.environment.query import resolve_query
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.model.training import TrainingProfile
from mgpu_doctor.probes.user_model import ModelObservation, ModelRequest, observe_model
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.known_issues import run_environment, with_known_issues
from mgpu_doctor.smoke.plan import USER_MODEL, SmokeOptions, plan_runs
from mgpu_doctor.smoke.rules import compare_with_single, smoke_outcomes
from mgpu_doctor.smoke.runner import run_suite
from mgpu_doctor.training.apply import with_training
from mgpu_doctor.training.observed import layer_words, model_outcome, usage_words, with_observed
from tests.user_model_runs import (
    MODEL_KINDS,
    TRACED,
    check_expected_difference,
    check_loss_nan_located,
    explained,
    traced_in,
    trained_runs,
)

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


def test_a_sub_model_is_a_nested_model_and_keras_cudnn_lstm_a_cudnn_rnn():
    nested = {"layers": [{"class": "Dense", "builtin": True}, {"class": "Functional", "builtin": True, "model": True}]}
    flat = {"layers": [{"class": "Dense", "builtin": True}, {"class": "CuDNNLSTM", "builtin": True}]}
    assert "nested_model" in usage_words(nested, {})[0]
    usage, decided = usage_words(flat, {})
    assert "nested_model" in set(decided) - set(usage)  # the layers were read: none is a model
    assert layer_words(flat) == ("dense", "lstm", "cudnn_rnn")


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


# ----------------------------------------------------------------------------- smoke --model

def test_smoke_model_plans_the_user_model_1_vs_n_and_the_stock_layers_only_where_named():
    options = SmokeOptions(user_model="gru_mixed:build", model_path=USER_MODELS, stock_layers=False)
    specs = plan_runs(options, 0)
    assert [(s.layer, s.devices, s.scenario) for s in specs] == [
        (USER_MODEL, 1, "even"), (USER_MODEL, 2, "even"), (USER_MODEL, 2, "uneven_final_batch"),
        (USER_MODEL, 2, "checkpoint")]
    assert all(s.user_model == "gru_mixed:build" and s.model_path == USER_MODELS for s in specs)
    assert not any(s.input_probe for s in specs)  # no --data: synthetic data, no pipeline to probe
    with_data = plan_runs(replace(options, user_data="gru_mixed:data"), 0)
    assert [s.input_probe for s in with_data] == [False, True, False, False]
    both = plan_runs(replace(options, stock_layers=True, layers=("dense",)), 0)
    assert {s.layer for s in both} == {"dense", USER_MODEL}


def test_the_user_model_s_runs_are_looked_up_with_its_observed_layers_and_usage():
    run = SmokeRun(USER_MODEL, "", 2, "cpu-virtual", "even", "error")
    env = run_environment(Environment(versions={}, layers=("gru", "dropout"), usage=("mixed_precision",)), run)
    assert env.layers == ("gru", "dropout") and env.usage == ("mixed_precision",)
    unknown = run_environment(Environment(versions={}), run)
    assert unknown.layers is None and unknown.usage is None  # nothing observed: "if your model uses ..."


@pytest.mark.tensorflow
@pytest.mark.slow
def test_smoke_model_trains_the_user_model_1_vs_n_with_a_verdict_per_scenario(capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code = main(["smoke", "--model", "gru_mixed:build", "--model-path", USER_MODELS, "--virtual-devices", "2",
                 "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    runs = {f"smoke/{r['layer']}/{r['devices']}x{r['device_kind']}/{r['scenario']}/b{r['global_batch']}": r
            for r in out["smoke_runs"]}
    assert set(runs) == {"smoke/model/1xcpu-virtual/even/b64", "smoke/model/2xcpu-virtual/even/b64",
                         "smoke/model/2xcpu-virtual/uneven_final_batch/b64",
                         "smoke/model/2xcpu-virtual/checkpoint/b64"}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    verdicts = {c["name"]: c["status"] for c in out["checks"]}
    assert verdicts["model"] == "passed"
    even = "smoke/model/2xcpu-virtual/even/b64"
    assert all(verdicts[name] == "passed" for name in runs if name != even), verdicts
    # its Dropout draws per replica: a difference from 1 device that the split training measured
    # is at most an info naming it
    assert runs[even]["split_layers"] == ["Dropout"] and runs[even]["expected_loss_difference"] is not None
    if verdicts[even] != "passed":
        [explained_by] = [f for c in out["checks"] if c["name"] == even for f in c["findings"] if f["severity"] != "ok"]
        assert explained_by["code"] == "smoke.model.expected-difference" and "Dropout" in explained_by["title"]
    assert runs[even]["replicas_identical"] is True
    assert "mixed_precision" in out["training"]["observed"]["usage"]
    # the round trip of the user's model (GRU, a custom metric, mixed_float16) in every format
    steps = runs["smoke/model/2xcpu-virtual/checkpoint/b64"]["checkpoint"]
    loads = [s for s in steps if s["stage"] == "load"]
    assert {s["load_devices"] for s in loads} == {1, 2} and len(loads) >= 4, steps
    assert all(s["ok"] and s["max_abs_diff"] is not None for s in loads), steps


@pytest.mark.tensorflow
@pytest.mark.slow
def test_the_user_model_on_its_own_data_a_fault_is_reported_and_looked_up():
    """--data: the user's arrays, and the input-bound probe on that pipeline; a fault injected in
    the N-device runs is an error of the model, reported in its own words."""
    options = SmokeOptions(user_model="gru_mixed:build", user_data="gru_mixed:data", model_path=USER_MODELS,
                           stock_layers=False, scenarios=("even",))
    specs = plan_runs(options, 0)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
           "MGPU_DOCTOR_SMOKE_FAULT": f"{USER_MODEL}:raise:2"}
    single, multi = runs = compare_with_single(run_suite(specs, python=sys.executable, stall_timeout_s=120,
                                                          env=env).runs)
    assert single.status == "ok" and single.losses, single
    assert multi.status == "error" and "injected fault" in multi.error_message
    matrix_env = Environment(versions={}, layers=("gru", "dropout", "dense"),
                             usage=("mixed_precision", "custom_metric"))
    outcome = with_known_issues(smoke_outcomes(runs), runs, load_matrix(bundled_matrix_dir()).issues,
                                matrix_env)[1]
    codes = [f.code for f in outcome.findings]
    assert f"smoke.{USER_MODEL}.error" in codes
    # the model's own error, in its own words: no upstream bug is blamed for it
    assert f"smoke.own-error.{USER_MODEL}--2cpu-virtual-even" in codes
    assert not [c for c in codes if c.startswith(("smoke.known-issue.", "smoke.not-in-matrix."))]


@pytest.mark.tensorflow
@pytest.mark.slow
def test_the_user_pipeline_is_probed_and_the_model_saved_and_reloaded_on_its_own_data():
    """--data returning a batched tf.data.Dataset: the input-bound probe measures that pipeline on
    N devices, and the checkpoint round trip predicts its first samples after each reload."""
    options = SmokeOptions(user_model="gru_mixed:build", user_data="gru_mixed:dataset", model_path=USER_MODELS,
                           stock_layers=False, scenarios=("even", "checkpoint"))
    specs = plan_runs(options, 0)[1:]  # not the 1-device run
    assert [(s.scenario, s.devices, s.input_probe) for s in specs] == [("even", 2, True), ("checkpoint", 2, False)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    trained, saved = run_suite(specs, python=sys.executable, stall_timeout_s=120, env=env).runs
    assert trained.status == "ok" and trained.input_samples_per_s and trained.input_samples_per_s > 0, trained
    assert trained.input_headroom is not None
    loads = [s for s in saved.checkpoint if s.stage == "load"]
    assert saved.status == "ok" and {s.load_devices for s in loads} == {1, 2}, saved
    assert all(s.ok and not s.differs for s in loads), saved.checkpoint


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_user_pipeline_too_slow_for_the_devices_is_found(capsys, monkeypatch):
    """The input-bound probe on the user's own pipeline (5 ms a sample): a warning with its rates."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code = main(["smoke", "--model", "gru_mixed:build", "--data", "gru_mixed:slow_dataset",
                 "--model-path", USER_MODELS, "--virtual-devices", "2", "--scenario", "even",
                 "--fail-on", "warning", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    found = [f for c in out["checks"] for f in c["findings"] if f["code"] == f"smoke.{USER_MODEL}.input-bound"]
    assert code == 1 and len(found) == 1, out["checks"]
    assert "samples/s delivered" in found[0]["title"] and "prefetch" in found[0]["fix"]


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_data_function_that_raises_keeps_the_model_s_facts_and_says_so():
    observation = observe("build", data="gru_mixed:broken_data")
    assert observation.stage == "data" and observation.seen
    observed, failed = model_outcome(observation).findings
    assert observed.code == "user-model.observed"
    assert failed.code == "user-model.data-failed" and "no shard matches train-*.tfrecord" in " ".join(failed.evidence)
    assert "mixed_precision" in with_observed(TrainingProfile(), observation).observed.usage


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_data_function_that_hangs_is_named_not_the_model_function():
    # Issue 40: a hang in --data was reported as "your model function did not return".
    observation = observe("build", timeout_s=40.0, data="gru_mixed:data_hangs")
    [finding] = model_outcome(observation).findings
    assert finding.code == "user-model.hang"
    assert finding.title.startswith("Your data function gru_mixed:data_hangs did not return"), finding.title


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_thread_left_running_is_named_and_the_child_still_ends(monkeypatch):
    observation = observe("leaves_a_thread", timeout_s=120.0)
    assert observation.stage == "done" and observation.threads == ["prefetch-worker"]
    codes = [f.code for f in model_outcome(observation).findings]
    assert codes == ["user-model.observed", "user-model.threads-left"]
    assert observation.duration_s < 100  # ended, not stopped at the model timeout


@pytest.mark.tensorflow
def test_when_the_model_fails_no_smoke_run_starts(capsys, tmp_path):
    # Issue 40: after --model failed, the 4 runs started anyway and called the function again.
    results = tmp_path / "runs.jsonl"
    code = main(["smoke", "--model", "broken_import:build", "--model-path", USER_MODELS,
                 "--results", str(results), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["smoke_runs"] == []
    smoke = next(c for c in report["checks"] if c["name"] == "smoke")
    assert smoke["status"] == "skipped" and "your module did not import" in smoke["skip_reason"]
    assert [f["code"] for c in report["checks"] for f in c["findings"]] == ["user-model.import-failed"]


# ----------------------------------------------------------------------------- every kind of model

def smoke_model(capsys, *argv: str) -> dict:
    code = main(["smoke", *argv, "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, [(c["name"], c["status"]) for c in out["checks"]]
    return out


@pytest.mark.tensorflow
@pytest.mark.slow
def test_an_unbuilt_subclassed_model_with_its_own_train_step_trains_from_a_src_layout(capsys, monkeypatch,
                                                                                      tmp_path):
    """src/shop/models.py, run from the project's root without --model-path: found, read, trained
    1 vs N and saved and reloaded; its variables are made by its first batch (its parameters are
    counted after it), and fit calls its own train_step."""
    package = tmp_path / "src" / "shop"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(MODEL_KINDS, package / "models.py")
    traced = tmp_path / "traced.txt"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv(TRACED, str(traced))
    runs = trained_runs(smoke_model(capsys, "--model", "shop.models:subclassed", "--data", "shop.models:data"))
    assert {runs[k]["parameters"] for k in (("even", 1), ("even", 2))} == {65}
    assert runs[("even", 2)]["replicas_identical"] is True
    assert traced_in(traced) >= 4  # the three trainings and the one before saving, each a process


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_subclassed_model_built_with_an_input_shape_trains_on_data_shaped_from_it(capsys, monkeypatch):
    """No --data: the synthetic data takes the shape model.build was given; Keras 3's build marks
    the model built without its layers' variables, which the reloads must make before loading."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    runs = trained_runs(smoke_model(capsys, "--model", "model_kinds:subclassed_built", "--model-path", USER_MODELS))
    assert runs[("even", 1)]["losses"] and runs[("even", 1)]["parameters"] == 65
    loads = [s for s in runs[("checkpoint", 2)]["checkpoint"] if s["stage"] == "load"]
    assert {s["format"] for s in loads} >= {"keras", "weights"} and all(s["ok"] for s in loads), loads


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_functional_model_with_two_inputs_and_two_outputs_trains(capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    runs = trained_runs(smoke_model(capsys, "--model", "model_kinds:two_inputs", "--model-path", USER_MODELS))
    one, two = runs[("even", 1)], runs[("even", 2)]
    assert one["losses"] == pytest.approx(two["losses"], rel=1e-4)


# ----------------------------------------------------------------------------- differences and NaNs explained

@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_difference_batchnormalization_explains_is_no_warning_a_replica_dependent_layer_is():
    check_expected_difference(sys.executable, dict(os.environ))


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_nan_made_by_a_custom_loss_is_located_in_the_loss_with_the_replica_and_its_batch():
    found = check_loss_nan_located(sys.executable, dict(os.environ))
    assert "divide_no_nan" in found["smoke.model.nan"].fix


@pytest.mark.tensorflow
@pytest.mark.slow
def test_a_nan_made_by_a_layer_is_located_in_that_layer_and_an_empty_replica_s_in_its_moving_statistics():
    [multi], found = explained("log_layer", 2, sys.executable, dict(os.environ), skip_single=True)
    origin = multi.nonfinite_origin
    assert (origin.kind, origin.name, origin.layer_class, origin.replica) == ("layer", "unguarded_log", "Log", 0)
    assert "NaN in layer unguarded_log (Log) on replica 0" in found["smoke.model.nan"].title
    # Keras 3's BatchNormalization on a replica the last batch leaves empty: the moving statistics
    runs, found = explained("batchnorm", 2, sys.executable, dict(os.environ), data="",
                            scenarios=("uneven_final_batch",), skip_single=True)
    [uneven] = runs
    origin = uneven.nonfinite_origin
    assert uneven.status == "nan" and origin.kind == "variable" and origin.replica == 1, uneven
    assert origin.name.startswith("batch_normalization/moving_") and origin.batch_shapes == [[1, 6], [0, 6]]
    assert "whose batch there was (0, 6) (no samples)" in "\n".join(found["smoke.model.nan"].evidence)
