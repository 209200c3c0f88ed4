"""The doctor on every TensorFlow it diagnoses: `check --python` on real environments of TensorFlow
1.15, 2.4, 2.8, 2.12, 2.15, 2.16, 2.18 and 2.21 (and 2.21 with tf-keras), each a fresh virtual
environment with only that TensorFlow (tests/tf_envs.py: installed once into ``.cache/``).

A healthy environment is never an error: each ends with no failed check and no warning but the
ones listed below with their reason; the known-issue check names exactly the entries whose
versions hold; what a release cannot train is a skipped run with its reason; and the seeds' case,
BatchNormalization giving NaN on a replica without samples in the last batch, is still found
where it happens.

Time (CI has 2 cores and 45 minutes for the whole suite): 1.15 and 2.15 (the last releases of
TensorFlow 1 and of Keras 2) run the whole standard level; the others the standard level of
``tf_envs.REDUCED`` (gru, batchnorm, attention: a layer for each thing the releases spell
differently; dense too where the checkpoint formats change: 2.4, 2.12, 2.16). The probes and the
generic-kernel check run on every one, the multi-worker smoke on 1.15 and 2.15. The environments
are built on first use, three installs at a time while the checks train. Measured 2026-11-26 on
this 2-core machine: the nine installs from a local index took about 4 minutes in all (1.15: 29 s,
2.8: 72 s); the module 815 s warm; `.ci/run` on a fresh clone, installs included, 44.8 minutes
alone with pip's cache warm (1,725 passed; the suite without this module: about 25 minutes).
Missing interpreter or index: skipped, except under ``CI``, where it fails.
"""

from __future__ import annotations

import fnmatch
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.matrix.ranges import Place
from mgpu_doctor.smoke.support import supported
from tests import tf_envs
from tests.tf_envs import ENVS, REPO, EnvUnavailable, Installed, TfEnv, installed_soon
from tests.user_model_runs import (
    TRACED,
    USER_MODELS,
    check_expected_difference,
    check_loss_nan_located,
    explained,
    traced_in,
    trained_runs,
)

pytestmark = pytest.mark.slow
CHECK_TIMEOUT_S = 1500
SEVERE = ("warning", "error", "crash")

# Findings of warning and above each environment may end with, by code (fnmatch), and why.
EVERYWHERE = {
    "gpu.none": "this machine has no NVIDIA driver: the smoke trains on virtual CPU devices",
    "smoke.dense.input-bound": "a timing: the input pipeline's rate against the step's on virtual CPU "
                               "devices of a shared 2-core machine says how busy the machine was, "
                               "not what the release does",
}
EXPECTED: dict[str, dict[str, str]] = {
    "1.15": {
        "smoke.batchnorm.nan": "the seeds' case, real on TensorFlow 1.15: BatchNormalization on a "
                               "replica without samples in the last batch gives NaN (a warning: "
                               "only the uneven final batch)",
        "smoke.not-in-matrix.batchnorm-plain-2cpu-virtual-uneven-final-batch":
            "the matrix's entries for that NaN name multi_gpu_model (TensorFlow 1) and "
            "MirroredStrategy from 2.0: on 1.15 with MirroredStrategy the doctor asks for a report",
    },
}
KERAS3_NAN = ("Keras 3's BatchNormalization gives NaN on a replica without samples in the last batch "
              "(a warning: only the uneven final batch)")
for keras3 in ("2.16", "2.18"):
    EXPECTED[keras3] = {
        "smoke.batchnorm.nan": KERAS3_NAN,
        "smoke.known-issue.tf-90686-mirrored-nan-since-tf216":
            "the matrix's entry for NaN under MirroredStrategy from TensorFlow 2.16 to 2.19",
    }
STILL = "the doctor says that it still happens here (the entry names older releases)"
EXPECTED["2.21"] = {
    "smoke.batchnorm.nan": KERAS3_NAN,
    # the entries about that NaN the matrix has for older releases: which one the doctor names
    # depends on the versions beside TensorFlow (this environment's, or the test suite's own)
    "smoke.known-issue.tf-batchnorm-nan-last-batch-of-one": f"BatchNormalization NaN, last batch of one: {STILL}",
    "smoke.known-issue.tf-mirrored-nan-empty-replica-batch": f"NaN with empty replica batches: {STILL}",
}
# Where the smoke's uneven final batch turns plain BatchNormalization's loss into NaN (not with
# tf-keras 2.21, nor with Keras 2.4 to 2.15).
NAN_ON_EMPTY_REPLICA = {"1.15", "2.16", "2.18", "2.21"}


def child_env(env: TfEnv, **extra: str) -> dict[str, str]:
    """The environment of a child diagnosing ``env``: this session's, without TF2_BEHAVIOR, which
    TensorFlow 2's ``import tensorflow`` sets to 1 in the importing process (its __init__.py) and
    which earlier tests of this session did: inherited, it turns TensorFlow 1.15 into its TF2
    mode (eager, other Keras), not what a 1.15 user runs."""
    base = {k: v for k, v in os.environ.items() if k != "TF2_BEHAVIOR"}
    return {**base, **extra, **env.environ}


def pip_versions(got: Installed) -> dict[str, str]:
    """What pip says is installed, by canonical name, tensorflow-cpu as tensorflow (the matrix's
    and the probe's name for it)."""
    versions = {canonicalize_name(k): v for k, v in got.versions.items()}
    if "tensorflow-cpu" in versions:
        versions["tensorflow"] = versions.pop("tensorflow-cpu")
    return versions


def env_named(name: str) -> TfEnv:
    return next(e for e in ENVS if e.name == name)


def ready(env: TfEnv) -> Installed:
    try:
        return installed_soon(env, ENVS)
    except EnvUnavailable as exc:
        if os.environ.get("CI"):  # CI has the interpreters and reaches the index: it must run these
            raise
        pytest.skip(f"TensorFlow {env.name}: {exc}")


_REPORTS: dict[str, tuple[Installed, dict, float]] = {}
_EXIT: dict[str, int] = {}


def diagnosed(name: str) -> tuple[Installed, dict, float]:
    """`check --python` on the environment at the standard level: its JSON report and wall time
    (the exit code in ``_EXIT``)."""
    if name not in _REPORTS:
        env = env_named(name)
        got = ready(env)
        cmd = [sys.executable, "-m", "mgpu_doctor", "check", "--python", str(got.python), "--format", "json",
               "--stall-timeout", "300"]
        if env.layers:
            cmd += ["--layers", ",".join(env.layers)]
        start = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, cwd=REPO,
                              stdin=subprocess.DEVNULL, env=child_env(env, TF_CPP_MIN_LOG_LEVEL="2"))
        wall = time.monotonic() - start
        assert done.stdout, done.stderr[-3000:]
        _REPORTS[name] = (got, json.loads(done.stdout), wall)
        _EXIT[name] = done.returncode
    return _REPORTS[name]


NAMES = [e.name for e in ENVS]
NOT_FROM_PIP = {"cuda", "cudnn", "nccl", "driver", "cublas"}
NAMED_PLACES = (Place.IN, Place.NEXT_SERIES, Place.BETWEEN)


def severe_findings(report: dict) -> list[tuple[str, str, str]]:
    return [(check["name"], f["code"], f["severity"]) for check in report["checks"]
            for f in check["findings"] if f["severity"] in SEVERE]


@pytest.mark.parametrize("name", NAMES)
def test_a_healthy_environment_ends_without_an_error_and_only_expected_warnings(name):
    got, report, wall = diagnosed(name)
    allowed = {**EVERYWHERE, **EXPECTED.get(name, {})}
    unexpected = [(check, code, severity) for check, code, severity in severe_findings(report)
                  if severity != "warning" or not any(fnmatch.fnmatch(code, p) for p in allowed)]
    assert not unexpected, f"TensorFlow {name} ({got.python}, {wall:.0f} s): {unexpected}"
    assert not [c["name"] for c in report["checks"] if c["status"] in ("failed", "crashed")]
    assert _EXIT[name] == 0
    assert report["snapshot"]["tensorflow"]["version"] == pip_versions(got)["tensorflow"]
    runs = report["smoke_runs"]
    assert runs, "no smoke training ran"
    statuses = {r["status"] for r in runs}
    assert statuses <= {"ok", "skipped", "nan"}, statuses
    for run in runs:
        if run["status"] == "skipped":
            assert run["skip_reason"].startswith(("MultiHeadAttention needs", "SyncBatchNormalization needs",
                                                  "the cuDNN", "BackupAndRestore needs")), run


@pytest.mark.parametrize("name", NAMES)
def test_what_a_release_cannot_train_is_skipped_with_its_reason_as_the_support_table_says(name):
    """The docs' support table (mgpu_doctor/smoke/support.py) and the child's decisions agree: a run is
    skipped exactly where a row says the release lacks it, and the checkpoint round trip saves
    exactly the formats the rows give that release."""
    _, report, _ = diagnosed(name)
    release = tf_envs.release(env_named(name))
    checks = {c["name"]: c for c in report["checks"]}
    for run in report["smoke_runs"]:
        assert supported(("smoke", run["layer"], run["variant"]), release) == (run["status"] != "skipped"), run
        if run["status"] == "skipped":
            assert f"(this is TensorFlow {release.tensorflow}" in run["skip_reason"], run["skip_reason"]
            variant = f"-{run['variant']}" if run["variant"] else ""
            outcome = checks[f"smoke/{run['layer']}{variant}/{run['devices']}x{run['device_kind']}/"
                             f"{run['scenario']}/b{run['global_batch']}"]
            assert outcome["status"] == "skipped" and outcome["skip_reason"] == run["skip_reason"]
        if run["scenario"] == "checkpoint":
            saved = {s["format"] for s in run["checkpoint"] if s["stage"] == "save" and s["ok"]}
            formats = ("keras", "weights", "tf_checkpoint", "savedmodel", "h5")
            assert saved == {f for f in formats if supported(("checkpoint", f), release)}
            assert all(s["ok"] for s in run["checkpoint"]), run["checkpoint"]


@pytest.mark.parametrize("name", NAMES)
def test_the_known_issues_named_are_exactly_the_entries_whose_versions_hold(name):
    """Versions from pip in that environment (not from the doctor's probes); the entries that need
    a GPU or another platform than Linux do not hold on this machine. With tf-keras in use the keras package
    (Keras 3, installed beside it) is not what tf.keras is: whether its version holds cannot be
    told, and an entry is named when the other versions it names hold. Entries that name a CUDA
    library (cuda, cudnn, nccl, the driver) are left out on both sides: their versions come from
    the TensorFlow build the doctor resolves (the `tensorflow` wheel's), not from pip."""
    got, report, _ = diagnosed(name)
    versions = pip_versions(got)
    untold = {"keras"} if got.env.environ.get("TF_USE_LEGACY_KERAS") == "1" else set()
    versions["python"] = report["snapshot"]["python"]["version"]

    def holds(entry) -> bool:
        told = {pkg: spec for pkg, spec in entry.affects.items() if pkg not in untold}
        if not told or entry.conditions.min_gpus or entry.conditions.platform not in (None, "linux"):
            return False
        # inside a range, or past the last report in the next series / between two reports with no fix
        # known: "cannot tell", named on its own (docs/matrix-schema.md, ranges as OSV reads them)
        return all(pkg in versions and entry.reading(pkg).place(versions[pkg]) in NAMED_PLACES for pkg in told)

    entries = [e for e in load_matrix(bundled_matrix_dir(), ()).issues if not set(e.affects) & NOT_FROM_PIP]
    expected = {e.id for e in entries if holds(e)}
    named = {f["code"].split(".", 1)[1] for c in report["checks"] if c["name"] == "known-issues"
             for f in c["findings"] if f["code"].startswith("known-issue.")}
    assert named & {e.id for e in entries} == expected


@pytest.mark.parametrize("name", NAMES)
def test_batchnorm_nan_on_an_empty_replica_is_found_where_it_happens(name):
    _, report, _ = diagnosed(name)
    [uneven] = [r for r in report["smoke_runs"] if r["layer"] == "batchnorm" and r["variant"] == "plain"
                and r["scenario"] == "uneven_final_batch" and r["devices"] == 2]
    even = [r for r in report["smoke_runs"] if r["layer"] == "batchnorm" and r["scenario"] == "even"]
    assert all(r["status"] in ("ok", "skipped") for r in even)
    if name not in NAN_ON_EMPTY_REPLICA:
        assert uneven["status"] == "ok"
        return
    assert uneven["status"] == "nan"
    [outcome] = [c for c in report["checks"] if c["name"] == "smoke/batchnorm-plain/2xcpu-virtual/uneven_final_batch/b64"]
    nan = next(f for f in outcome["findings"] if f["code"] == "smoke.batchnorm.nan")
    assert nan["severity"] == "warning" and "drop_remainder=True" in nan["fix"]


@pytest.mark.parametrize("name", NAMES)
def test_the_probes_run_under_the_environments_interpreter(name):
    """The TensorFlow probe, the package probe and the library loader are children in the
    diagnosed interpreter (Python 3.7 to 3.12 here): each gathered its facts."""
    got, report, _ = diagnosed(name)
    snap = report["snapshot"]
    assert snap["python"]["executable"] == str(got.python)
    tf = snap["tensorflow"]
    assert "unavailable" not in tf, tf
    assert "error" not in tf["build_info"], tf["build_info"]
    # the `tensorflow` wheel carries CUDA from 2.1 (1.15's GPU build was tensorflow-gpu)
    assert tf["built_with_cuda"] is (env_named(name).requirements[0].startswith("tensorflow==2."))
    assert "CPU" in {d["device_type"] for d in tf["physical_devices"]}
    assert tf["keras_version"] not in ("", None, "unknown")
    packages = {canonicalize_name(k): v for k, v in snap["packages"]["versions"].items()}
    pip = {canonicalize_name(k): v for k, v in got.versions.items()}
    distribution = "tensorflow-cpu" if "tensorflow-cpu" in pip else "tensorflow"
    for package in (distribution, "numpy", "protobuf"):
        assert packages.get(package) == pip.get(package), (package, packages.get(package), pip.get(package))
    assert "unavailable" not in snap["libraries"], snap["libraries"]


KERNEL_PROBE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
from _tf_api import Api


api = Api(tf)
out = {"keras3": api.keras3}
for kind in ("lstm", "gru"):
    for variant in ("cudnn", "generic"):
        ops = set()
        if api.eager:
            layer = api.recurrent(kind, variant, 4)
            model = api.keras.Sequential([api.keras.Input((6, 3)), layer])
            graph = tf.function(model).get_concrete_function(tf.TensorSpec((None, 6, 3), tf.float32)).graph
        else:  # TensorFlow 1: the layer's own graph
            graph = tf.Graph()
            with graph.as_default():
                layer = api.recurrent(kind, variant, 4)
                layer(api.keras.Input((6, 3)))
        definition = graph.as_graph_def()
        ops.update(n.op for n in definition.node)
        ops.update(n.op for f in definition.library.function for n in f.node_def)
        out["%s-%s" % (kind, variant)] = {
            "cudnn_ops": sorted(op for op in ops if op.startswith("Cudnn")),
            "use_cudnn": str(getattr(layer, "use_cudnn", None)),
        }
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", NAMES)
def test_the_generic_recurrent_kernel_never_takes_cudnn_and_the_cudnn_one_can(name):
    """The traced graph of each variant: Keras 2 puts the cuDNN kernel (CudnnRNN ops, picked at run
    time where a GPU is) in the graph of the cuDNN-eligible layer only, never in the unrolled one;
    TensorFlow 1's generic LSTM has none, its CuDNNLSTM has them; Keras 3 decides at call time
    from `use_cudnn`, which the generic variant sets to False."""
    got = ready(env_named(name))
    done = subprocess.run([str(got.python), "-c", KERNEL_PROBE, str(REPO / "mgpu_doctor" / "child_scripts")],
                          capture_output=True, text=True, timeout=600, env=child_env(env_named(name)))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for kind in ("lstm", "gru"):
        cudnn, generic = seen[f"{kind}-cudnn"], seen[f"{kind}-generic"]
        assert generic["cudnn_ops"] == [], (kind, generic)
        if seen["keras3"]:
            assert generic["use_cudnn"] == "False" and cudnn["use_cudnn"] == "auto"
        else:
            assert cudnn["cudnn_ops"], (kind, cudnn)


@pytest.mark.parametrize("name", tf_envs.MULTI_WORKER)
def test_multi_worker_smoke_trains_and_compares_the_workers(name):
    """Two workers with MultiWorkerMirroredStrategy (its `experimental` form on 1.15), dense."""
    got = ready(env_named(name))
    done = subprocess.run(
        [sys.executable, "-m", "mgpu_doctor", "smoke", "--python", str(got.python), "--workers", "2",
         "--layers", "dense", "--format", "json"],
        capture_output=True, text=True, timeout=900, cwd=REPO, stdin=subprocess.DEVNULL,
        env=child_env(env_named(name), TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-3000:]
    [outcome] = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "smoke/multiworker/dense/2workers"]
    assert [f["code"] for f in outcome["findings"]] == ["multiworker.dense.ok"], outcome
    assert "largest weight difference between workers (compared in the parent): 0" in outcome["findings"][0]["evidence"]


def test_tf2_behavior_set_for_tensorflow_1_15_is_named_and_unset_passes():
    """TF2_BEHAVIOR=1 (what a process that imported TensorFlow 2 passes on) turns 1.15 into its TF2 mode."""
    env = env_named("1.15")
    got = ready(env)
    codes = {}
    for value in ("1", None):
        extra = {} if value is None else {"TF2_BEHAVIOR": value}
        done = subprocess.run(
            [sys.executable, "-m", "mgpu_doctor", "check", "--quick", "--python", str(got.python),
             "--checks", "tf2-behavior", "--format", "json"],
            capture_output=True, text=True, timeout=120, cwd=REPO, stdin=subprocess.DEVNULL,
            env=child_env(env, **extra))
        [check] = json.loads(done.stdout)["checks"]
        codes[value] = [f["code"] for f in check["findings"]]
    assert codes == {"1": ["tensorflow.tf2-behavior-on-tf1"], None: ["tensorflow.tf2-behavior-ok"]}


def test_tensorflow_1_15_ignores_an_empty_grpc_proxy_but_not_no_proxy():
    """The rule the `grpc-proxy` check keeps for 1.15: its gRPC takes https_proxy even with grpc_proxy
    set empty (the workers hang behind a proxy that never answers), and goes direct for a host in
    no_proxy."""
    env = env_named("1.15")
    got = ready(env)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    status = {}
    for name, extra, stall in (("grpc_proxy empty", {"grpc_proxy": ""}, "8"),
                               ("no_proxy", {"no_proxy": "127.0.0.1"}, "60")):
        base = {k: v for k, v in child_env(env, TF_CPP_MIN_LOG_LEVEL="2").items()
                if k.lower() not in ("grpc_proxy", "http_proxy", "no_proxy", "no_grpc_proxy")}
        done = subprocess.run(
            [sys.executable, "-m", "mgpu_doctor", "smoke", "--python", str(got.python), "--workers", "2",
             "--layers", "dense", "--stall-timeout", stall, "--format", "json"],
            capture_output=True, text=True, timeout=300, cwd=REPO, stdin=subprocess.DEVNULL,
            env={**base, "https_proxy": dead, **extra})
        [outcome] = [c for c in json.loads(done.stdout)["checks"] if c["name"].startswith("smoke/multiworker/")]
        status[name] = [f["code"] for f in outcome["findings"]]
    assert status["no_proxy"] == ["multiworker.dense.ok"]
    assert "multiworker.dense.hang" in status["grpc_proxy empty"]


# Your own model through `smoke --model` (tests/user_models/model_kinds.py): TensorFlow 1 and the last
# Keras 2 (Keras 3: tests/test_user_model.py). Each is one `smoke` of 4 runs.
YOUR_MODELS = [("2.15", "subclassed"), ("2.15", "subclassed_built"), ("2.15", "two_inputs"), ("1.15", "two_inputs")]


def smoke_your_model(name: str, function: str, traced: Path) -> subprocess.CompletedProcess[str]:
    env = env_named(name)
    got = ready(env)
    data = ["--data", "model_kinds:data"] if function == "subclassed" else []
    return subprocess.run(
        [sys.executable, "-m", "mgpu_doctor", "smoke", "--python", str(got.python), "--model",
         f"model_kinds:{function}", *data, "--model-path", str(USER_MODELS), "--format", "json"],
        capture_output=True, text=True, timeout=900, cwd=REPO, stdin=subprocess.DEVNULL,
        env=child_env(env, TF_CPP_MIN_LOG_LEVEL="2", **{TRACED: str(traced)}))


# TensorFlow 2.15's own bug (the matrix's tf-mirrored-load-weights-typeerror-tf215,
# tensorflow/tensorflow#62831, fixed in 2.16): weights loaded under MirroredStrategy raise this
# TypeError. model_kinds' subclassed model (it holds a Mean loss tracker) meets it reloading its
# .keras file on 2 devices, not on 1; the same model without the tracker did not.
TF215_LOAD_UNDER_MIRRORED = "TypeError: unsupported operand type(s) for /: 'Dataset' and 'int'"


@pytest.mark.parametrize(("name", "function"), YOUR_MODELS)
def test_your_model_trains_through_smoke_model(name, function, tmp_path):
    """Subclassed (not built: its first batch makes its variables; built with an input shape: the
    synthetic data takes it), with its own train_step; functional with two inputs and outputs.
    Keras 2 cannot save a subclassed model as HDF5, on any number of devices: an info, not an error."""
    done = smoke_your_model(name, function, tmp_path / "traced.txt")
    report = json.loads(done.stdout)
    known_bug = TF215_LOAD_UNDER_MIRRORED if function.startswith("subclassed") else ""
    assert done.returncode == (1 if known_bug else 0), done.stderr[-3000:]
    runs = trained_runs(report, reload_fails_with=known_bug)
    assert runs[("even", 1)]["parameters"] == runs[("even", 2)]["parameters"] > 0
    if function.startswith("subclassed"):
        assert traced_in(tmp_path / "traced.txt") >= 4
        [limit] = [f for c in report["checks"] for f in c["findings"] if f["code"] == "smoke.model.format-unusable"]
        assert limit["severity"] == "info" and limit["evidence"][0].startswith("h5 (one device, no strategy): "
                                                                               "NotImplementedError"), limit


def test_tensorflow_1_15_refuses_a_subclassed_model_under_a_strategy_and_says_so(tmp_path):
    """tf.keras 1.15 cannot compile a subclassed model under a distribution strategy: one finding in
    its own words, and no smoke run starts."""
    done = smoke_your_model("1.15", "subclassed", tmp_path / "traced.txt")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["smoke_runs"] == []
    [finding] = [f for c in report["checks"] for f in c["findings"] if f["severity"] == "error"]
    assert finding["code"] == "user-model.build-failed"
    assert "do not support distribution strategy with a `Sequential` model that is created without" \
           " `input_shape`/`input_dim` set in its first layer or a subclassed model" in finding["evidence"][0]


# Differences and NaNs of your model explained (tests/user_models/replica_effects.py), on TensorFlow 1
# and the last Keras 2 (Keras 3: tests/test_user_model.py): 2 x 2 runs each, and 1 or 2 NaN runs.
@pytest.mark.parametrize("name", ["2.15", "1.15"])
def test_your_model_s_expected_difference_is_measured_and_a_replica_dependent_layer_still_warns(name):
    env = env_named(name)
    check_expected_difference(str(ready(env).python), child_env(env))


def test_tensorflow_1_15_moving_variance_nan_on_an_empty_replica_is_located_in_the_layer():
    """The NaN of plain BatchNormalization on a replica without samples (the loss is finite that epoch):
    the layer's moving statistics on replica 1, whose share of the last batch was empty."""
    env = env_named("1.15")
    runs, found = explained("batchnorm", 2, str(ready(env).python), child_env(env), data="",
                            scenarios=("even", "uneven_final_batch"))
    [uneven] = [r for r in runs if r.scenario == "uneven_final_batch"]
    origin = uneven.nonfinite_origin
    assert uneven.status == "nan" and origin is not None and origin.kind == "variable", uneven
    assert origin.name == "batch_normalization/moving_mean" and "batch_normalization/moving_variance" in origin.also
    assert (origin.replica, origin.epoch, origin.step, origin.batch_shapes) == (1, 1, 5, [[1, 6], [0, 6]])
    nan = found["smoke.model.nan"]
    assert "layer batch_normalization's moving_mean, moving_variance" in nan.title, nan.title
    assert "on replica 1 of 2, whose batch there was (0, 6) (no samples)" in "\n".join(nan.evidence)


@pytest.mark.parametrize("name", ["2.15", "1.15"])
def test_a_custom_loss_s_nan_is_located_in_the_loss_with_the_replica_and_its_batch(name):
    """The step replayed layer by layer from the weights before it: eagerly on each replica (2.15),
    through Keras' session on each replica's share of the batch (1.15's graph mode)."""
    env = env_named(name)
    check_loss_nan_located(str(ready(env).python), child_env(env))


@pytest.mark.parametrize("name", NAMES)
def test_quick_and_standard_agree_on_every_fact_both_show(name):
    """`check --quick` (TensorFlow not imported) against the standard level's report above: every
    finding both show has the same severity and the same words (its origin aside)."""
    from tests.test_levels_agree import disagreements

    got, standard, _ = diagnosed(name)
    done = subprocess.run([sys.executable, "-m", "mgpu_doctor", "check", "--quick", "--python", str(got.python),
                           "--format", "json"], capture_output=True, text=True, timeout=120, cwd=REPO,
                          stdin=subprocess.DEVNULL, env=child_env(env_named(name), TF_CPP_MIN_LOG_LEVEL="2"))
    shared, differ = disagreements(json.loads(done.stdout), standard)
    assert shared, "no finding in common"
    assert not differ, differ
