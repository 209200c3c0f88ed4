"""Known issues recognised by what the failure printed: signatures in the matrix, the evidence
lines kept from a text, and the matching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import load_known_issue_files, load_matrix
from mgpu_doctor.matrix.mechanisms import MECHANISMS
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.matrix.signatures import signature_hits
from mgpu_doctor.model.evidence import LINE_CHARS, MAX_LINES, evidence_lines, keeps
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.smoke.known_issues import smoke_findings
from mgpu_doctor.smoke.plan import USER_MODEL
from tests.test_matrix import entry, problems_of

URL = "https://github.com/tensorflow/tensorflow/issues/1"
MATRIX = load_matrix(bundled_matrix_dir())


def signature(text: str, source: str = URL, extra: str = "") -> str:
    return f'[[issue.signatures]]\ntext = "{text}"\nsource = "{source}"\n{extra}'


@pytest.mark.parametrize(("text", "source", "why"), [
    ("Segfault", URL, "literal characters"),  # too short to name a cause
    ("Attempt to convert a value … with an unsupported type", "https://github.com/x/y/issues/9",
     "of one of this entry's sources"),
    ("model.fit(dataset, epochs=3, verbose=2)", URL, "not a line the doctor keeps"),
    ("x" * 250 + " error", URL, "at most 240"),
])
def test_validate_refuses_a_signature_that_cannot_name_the_cause(tmp_path: Path, text, source, why) -> None:
    found = problems_of(tmp_path, entry(extra=signature(text, source)))
    assert len(found) == 1 and why in found[0], found
    assert found[0].startswith(f"{tmp_path / 'rules.toml'} [rule-entry] signatures[0]."), found


def test_validate_accepts_a_signature_from_a_source(tmp_path: Path) -> None:
    sig = signature("ValueError: Attempt to convert a value (PerReplica:{…}) with an unsupported type")
    assert problems_of(tmp_path, entry(extra=sig)) == []
    assert problems_of(tmp_path, entry(extra=sig + "identifies = false\n")) == []
    assert "identifies" in problems_of(tmp_path, entry(extra=sig + 'identifies = "no"\n'))[0]


def loaded(tmp_path: Path, *texts: str):
    path = tmp_path / "rules.toml"
    path.write_text("schema_version = 1\n" + entry(extra="".join(signature(t) for t in texts)))
    result = load_known_issue_files([path])
    assert not result.problems, result.problems
    return result.issues


def test_a_signature_matches_its_pieces_in_order_within_one_line(tmp_path: Path) -> None:
    issues = loaded(tmp_path, "Loaded runtime CuDNN library: … but source was compiled with: …")
    lines = evidence_lines([
        "I get this:",
        "2018-08-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_dnn.cc:343] Loaded  runtime "
        "CUDNN library: 7.1.4 but source was compiled with: 7.2.1.  CuDNN library major and minor ...",
    ])
    [hit] = signature_hits(issues, lines, "pasted text")
    assert hit.line.line == 2 and hit.where == "pasted text, line 2"
    # the same pieces out of order, or split over two lines, are not the line
    assert signature_hits(issues, evidence_lines(["but source was compiled with: 7.2 Loaded runtime CuDNN "
                                                  "library: 7.1 error"]), "x") == []
    assert signature_hits(issues, evidence_lines(["Loaded runtime CuDNN library: 7.1.4 error",
                                                  "but source was compiled with: 7.2.1"]), "x") == []


def test_evidence_keeps_failure_lines_once_masked_and_cut() -> None:
    token = "ghp_" + "a1B2" * 9
    lines = ["just prose", "ValueError: boom", "ValueError: boom", '  File "train.py", line 41, in <module>',
             f"error: GITHUB_TOKEN={token} " + "x" * 400]
    kept = evidence_lines(lines)
    assert [(e.line, e.repeated) for e in kept] == [(2, 1), (4, 0), (5, 0)]
    assert token[:8] not in kept[2].text and len(kept[2].text) == LINE_CHARS
    assert keeps("NCCL WARN Call to connect returned Connection refused") and not keeps("Epoch 1/3")


def test_evidence_of_a_long_log_keeps_its_start_and_its_end() -> None:
    kept = evidence_lines([f"error {i}" for i in range(MAX_LINES * 3)])
    assert len(kept) == MAX_LINES and kept[0].line == 1 and kept[-1].line == MAX_LINES * 3


# --- the findings: check --from PASTE, check --log FILE ------------------------------------------

TRACEBACK = """I get this when training with MultiWorkerMirroredStrategy:

```
Traceback (most recent call last):
  File "train.py", line 41, in <module>
    model.fit(ds, epochs=3)
  File "/usr/lib/python3/site-packages/keras/src/utils/traceback_utils.py", line 122, in error_handler
    raise e.with_traceback(filtered_tb) from None
ValueError: Attempt to convert a value (PerReplica:{
  0: <tf.Tensor: shape=(), dtype=float32, numpy=0.5>
}) with an unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.
```
"""
# The same traceback ending in a line no bundled entry prints (the team matrix of the tests names it).
SYNTHETIC = TRACEBACK.replace("ValueError: Attempt to convert a value (PerReplica:{",
                              "ValueError: Cannot fold a PerReplica value into our metric (mgpu-test):")
TEAM_ENTRY = '''schema_version = 1

[[issue]]
id = "team-perreplica"
title = "Keras 3 fit under MultiWorkerMirroredStrategy fails converting a PerReplica value"
symptom = "error"
confidence = "reported"
summary = "Seen on our cluster."
workaround = "From our tracker: train with tf-keras."
affects = {{ keras = "{keras}" }}
[[issue.sources]]
url = "https://example.org/our-tracker/7"
kind = "issue"
[[issue.signatures]]
text = "ValueError: Cannot fold a PerReplica value into our metric"
source = "https://example.org/our-tracker/7"
identifies = {identifies}
'''


def team_matrix(tmp_path: Path, keras: str = ">=3.0", identifies: str = "true") -> Path:
    directory = tmp_path / "team"
    directory.mkdir()
    (directory / "team.toml").write_text(TEAM_ENTRY.format(keras=keras, identifies=identifies))
    return directory


def findings_of(capsys, *argv: str) -> list[dict]:
    code = main(["check", *argv, "--format", "json", "--no-redact"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return [f for c in json.loads(out)["checks"] for f in c["findings"]]


def test_a_traceback_alone_names_the_known_issue_its_line_shows(tmp_path: Path, capsys) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(SYNTHETIC)
    found = findings_of(capsys, "--from", str(paste), "--matrix", str(team_matrix(tmp_path)))
    [named] = [f for f in found if f["code"] == "known-issue.team-perreplica"]
    assert named["severity"] == "warning" and named["title"].startswith("Known issue shown by the pasted text, line 9")
    assert "the pasted text, line 9: ValueError: Cannot fold a PerReplica value into our metric (mgpu-test):" in named["evidence"]
    assert any(e.startswith("not known: keras >=3.0") for e in named["evidence"]), named["evidence"]
    assert named["fix"] == "From our tracker: train with tf-keras."
    assert not [f for f in found if f["code"] == "matrix.unknown-error"]  # the line is named: not unknown


def test_an_error_no_signature_names_is_reported_as_itself(tmp_path: Path, capsys) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(SYNTHETIC)
    found = findings_of(capsys, "--from", str(paste))
    [own] = [f for f in found if f["code"] == "matrix.unknown-error"]
    assert own["severity"] == "warning"
    assert "your code: train.py, line 41, in <module>" in own["evidence"]
    assert f"what the line means: {PER_REPLICA}" in own["evidence"]
    assert own["fix"].startswith("General advice (no known issue names this line): ")


def test_a_line_many_causes_print_names_an_entry_only_where_nothing_contradicts_it(tmp_path, capsys) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(SYNTHETIC + "\nkeras==3.5.0\n")
    fits = findings_of(capsys, "--from", str(paste), "--matrix",
                       str(team_matrix(tmp_path, ">=3.0,<=3.6.0", "false")))
    [named] = [f for f in fits if f["code"] == "known-issue.team-perreplica"]
    assert named["title"].startswith("A possible cause of the pasted text, line 9 (many causes print that line)")
    (tmp_path / "team").rename(tmp_path / "old")
    outside = findings_of(capsys, "--from", str(paste), "--matrix",
                          str(team_matrix(tmp_path, ">=3.6.0,<=3.8.0", "false")))
    assert not [f for f in outside if f["code"] == "known-issue.team-perreplica"]
    assert [f for f in outside if f["code"] == "matrix.unknown-error"]  # then it is the error itself
    (tmp_path / "team").rename(tmp_path / "older")
    # past the last report with no fix known, nothing contradicts it: a possible cause, said so
    past = findings_of(capsys, "--from", str(paste), "--matrix", str(team_matrix(tmp_path, "<=3.3.0", "false")))
    [named] = [f for f in past if f["code"] == "known-issue.team-perreplica"]
    assert named["severity"] == "info"
    assert "not known: keras 3.5.0: reported up to 3.3.0, no fix known" in named["evidence"]


def test_a_line_that_identifies_its_cause_names_it_outside_the_reported_versions(tmp_path, capsys) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(SYNTHETIC + "\nkeras==3.5.0\n")
    found = findings_of(capsys, "--from", str(paste), "--matrix", str(team_matrix(tmp_path, ">=3.6.0,<=3.8.0")))
    [named] = [f for f in found if f["code"] == "known-issue.team-perreplica"]
    assert named["severity"] == "warning"
    assert "the line names this cause all the same: it is still there, or back" in named["evidence"]
    (tmp_path / "team").rename(tmp_path / "older")
    past = findings_of(capsys, "--from", str(paste), "--matrix", str(team_matrix(tmp_path, "<=2.15.0")))
    [named] = [f for f in past if f["code"] == "known-issue.team-perreplica"]
    assert named["severity"] == "warning"
    assert "not known: keras 3.5.0: reported up to 2.15.0, no fix known" in named["evidence"]
    assert "the line names this cause all the same: its versions are past what its sources report" \
        in named["evidence"]


def test_a_training_log_is_read_from_its_end(tmp_path: Path, capsys, monkeypatch) -> None:
    import mgpu_doctor.process.inputs as inputs

    log = tmp_path / "train.log"
    log.write_text("ValueError: early and cut away\n" + "Epoch 1/1 step\n" * 2000 + SYNTHETIC)
    monkeypatch.setattr(inputs, "MAX_INPUT_BYTES", 4096)
    monkeypatch.setattr(inputs.read_log_tail, "__defaults__", (4096,))
    found = findings_of(capsys, "--quick", "--log", str(log), "--matrix", str(team_matrix(tmp_path)))
    [named] = [f for f in found if f["code"] == "known-issue.team-perreplica"]
    assert named["title"].startswith(f"Known issue shown by the log {log} (its last 3 KiB), line ")
    assert not any("early and cut away" in e for f in found for e in f["evidence"])


def test_a_log_that_cannot_be_read_is_bad_input(tmp_path: Path, capsys) -> None:
    assert main(["check", "--quick", "--log", str(tmp_path / "missing.log")]) == 2
    assert "--log" in capsys.readouterr().err
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF\x00\x00\x01")
    assert main(["check", "--quick", "--log", str(binary)]) == 2


# --- the smoke: a run's own error before versions --------------------------------------------

BN_NAN_ENTRY = "smoke.known-issue.tf-mirrored-nan-empty-replica-batch"


def user_run(status: str, error_type: str = "", error_message: str = "", layer: str = USER_MODEL,
             scenario: str = "uneven_final_batch", traceback: str = "") -> SmokeRun:
    return SmokeRun(layer, "", 2, "cpu-virtual", scenario, status, error_type=error_type,
                    error_message=error_message, traceback=traceback)


def test_a_user_model_that_cannot_be_imported_is_its_own_error_not_an_upstream_bug() -> None:
    env = Environment(versions={"tensorflow": "2.15.1", "keras": "2.15.0"}, gpus=2)
    trace = ('Traceback (most recent call last):\n'
             '  File "/venv/lib/python3.11/site-packages/mgpu_doctor/child_scripts/_smoke_user_model.py", '
             'line 40, in build\n'
             '  File "/work/proj/models/net.py", line 3, in <module>\n'
             "    import tensorflow_addons as tfa\nModuleNotFoundError: No module named 'tensorflow_addons'\n")
    findings = smoke_findings(MATRIX.issues, env, [user_run("error", "ModuleNotFoundError",
                                                            "No module named 'tensorflow_addons'", traceback=trace)])
    assert [f.code for f in findings] == ["smoke.own-error.model--2cpu-virtual-uneven-final-batch"]
    [own] = findings
    assert "your code: /work/proj/models/net.py, line 3, in <module>" in own.evidence
    assert "its error: ModuleNotFoundError: No module named 'tensorflow_addons'" in own.evidence
    assert "still happens" not in own.title


def test_a_user_model_s_nan_is_never_an_old_entry_still_happening() -> None:
    env = Environment(versions={"tensorflow": "2.21.0", "keras": "3.15.1"}, gpus=2, layers=("batchnorm", "dense"))
    stock = smoke_findings(MATRIX.issues, env, [user_run("nan", layer="batchnorm")])
    assert any("still happens" in f.title for f in stock)  # the doctor's own BatchNormalization model
    mine = smoke_findings(MATRIX.issues, env, [user_run("nan")])
    assert not any("still happens" in f.title for f in mine), [f.title for f in mine]
    old = Environment(versions={"tensorflow": "2.4.0"}, gpus=2, layers=("batchnorm", "dense"))
    [could] = [f for f in smoke_findings(MATRIX.issues, old, [user_run("nan")]) if f.code == BN_NAN_ENTRY]
    assert "a known issue could explain it" in could.title
    assert any("your model's own loss and layers" in e for e in could.evidence)


def test_a_smoke_error_is_looked_up_by_its_line_first(tmp_path: Path) -> None:
    issues = loaded(tmp_path, "InvalidArgumentError: … Collective ops … must have the same … key")
    env = Environment(versions={"tensorflow": "2.21.0"}, gpus=2)
    run = user_run("error", "InvalidArgumentError", "in user code: Collective ops 0 and 1 must have the same "
                   "instance key", layer="dense", scenario="even")
    [found] = smoke_findings(issues, env, [run])
    assert found.code == "smoke.known-issue.rule-entry" and "known issue shown by its error" in found.title
    # an error no line of that entry names is not that entry, whatever the versions say
    other = user_run("error", "ValueError", "shapes (2, 3) and (4,) are incompatible",
                     layer="dense", scenario="even")
    [unknown] = smoke_findings(issues, Environment(versions={"tensorflow": "2.10.0"}, gpus=2), [other])
    assert unknown.code.startswith("smoke.not-in-matrix.")
    assert "its error: ValueError: shapes (2, 3) and (4,) are incompatible" in unknown.evidence


USER_MODELS = str(Path(__file__).parent / "user_models")


def smoke_findings_of(capsys, monkeypatch, model: str) -> list[dict]:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    main(["smoke", "--model", model, "--model-path", USER_MODELS, "--virtual-devices", "2", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    return [f for c in out["checks"] for f in c["findings"]]


@pytest.mark.tensorflow
@pytest.mark.slow
def test_smoke_model_whose_module_does_not_import_is_the_user_s_error(capsys, monkeypatch) -> None:
    # Since issue 40 no smoke run starts after the model failed in its own child: the failure is
    # one finding of the user's model, in its own words, with the user's frame.
    found = smoke_findings_of(capsys, monkeypatch, "broken_import:build")
    [own] = [f for f in found if f["severity"] == "error"]
    assert own["code"] == "user-model.import-failed", own
    text = "\n".join([own["title"], *own["evidence"]])
    assert "tensorflow_addons_that_is_not_installed" in text and 'broken_import.py", line 3, in <module>' in text
    assert not [f for f in found if f["code"].startswith("smoke.own-error.")]
    assert not [f for f in found if f["code"].startswith(("smoke.known-issue.", "smoke.not-in-matrix."))]
    assert not [f for f in found if "still happens" in f["title"]]


@pytest.mark.tensorflow
@pytest.mark.slow
def test_smoke_model_whose_loss_divides_by_zero_is_not_an_upstream_bug(capsys, monkeypatch) -> None:
    found = smoke_findings_of(capsys, monkeypatch, "gru_mixed:divides_by_zero")
    nan = [f for f in found if f["code"] == f"smoke.{USER_MODEL}.nan"]
    assert nan, [f["code"] for f in found]  # the empty replica's 0 / 0
    assert not [f for f in found if "still happens" in f["title"]]
    blamed = [f for f in found if f["code"].startswith("smoke.known-issue.") and "uneven" in f["title"]]
    assert all("could explain it" in f["title"] for f in blamed), blamed


@pytest.mark.parametrize(("body", "code", "words"), [
    ("When I start training I get the message Loaded runtime CuDNN library: 7.1.4 but source was compiled "
     "with: 7.2.1 and then it crashes.", "pasted.runtime-older-than-build", "cuDNN 7.1.4 was loaded"),
    ("Hi, on import I see: Could not load dynamic library 'libcudart.so.10.2'; dlerror: libcudart.so.10.2: "
     "cannot open shared object file and no GPU is used", "pasted.library-not-loaded", "libcudart.so.10.2"),
])
def test_the_generic_lines_are_read_inside_a_sentence_of_the_body(tmp_path: Path, capsys, body, code, words) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(body + "\n")
    [found] = [f for f in findings_of(capsys, "--from", str(paste)) if f["code"] == code]
    assert found["severity"] == "error" and words in found["title"]


NCCL = "NCCL, which exchanges the gradients between GPUs, failed"
PER_REPLICA = ("a per-replica value reached code that wants one tensor, or a call that must run once for all "
               "replicas ran inside one replica (tf.distribute's replica and cross-replica contexts mixed)")
HOST_OOM = "the machine's memory (RAM, not the GPU's) ran out and the kernel's OOM killer ended a process"
GPU_OOM = "the GPU ran out of memory"
PIP_LIST = "```\nPackage        Version\n-------------- -------\ntensorflow-gpu 2.4.1\n```\n"


@pytest.mark.parametrize(("text", "means"), [
    ("ncclCommInitRank failed: unhandled system error", NCCL),
    ('when i run the script, it shows mistake "ValueError: Flattening a PerReplica to components is not '
     'supported in replica context."', PER_REPLICA),
    ("RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
     "the driver is older than the CUDA runtime needs"),
    # cudaErrorInsufficientDriver's own text (CUDA runtime, cudaGetErrorString), as an issue's title or
    # quoted without an exception: tensorflow/tensorflow#31319, NVIDIA/nvidia-docker#399
    ("CUDA driver version is insufficient for CUDA runtime version",
     "the driver is older than the CUDA runtime needs"),
    # tf.distribute's RuntimeError (tensorflow/python/distribute/distribute_lib.py,
    # _require_cross_replica_or_default_context_extended), with its exception and quoted without one
    ("RuntimeError: Method requires being in cross-replica context, use get_replica_context().merge_call()",
     PER_REPLICA),
    ("MirroredStrategy with train_on_batch: Method requires being in cross-replica context, use "
     "get_replica_context().merge_call()", PER_REPLICA),
    # ncclGetErrorString's text for ncclRemoteError (NVIDIA/nccl src/init.cc), as XGBoost wraps it
    # (Databricks' XGBoost troubleshooting page quotes it)
    ("NCCL failure: remote process exited or there was a network error", NCCL),
    # The Linux kernel's OOM killer (mm/oom_kill.c), as dmesg prints it: the machine's RAM, not the GPU's
    ("[ 8127.412345] Out of memory: Killed process 4242 (python) total-vm:81234567kB, anon-rss:60123456kB, "
     "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:123456kB oom_score_adj:0", HOST_OOM),
    ("[ 8127.401234] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, "
     "oom_score_adj=0", HOST_OOM),
    # TensorFlow's own (the BFC allocator's OOM as an exception), still the GPU's after the kernel's class
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
     "shape[256,512,28,28] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
     "GPU_0_bfc", GPU_OOM),
])
def test_a_line_naming_a_failing_mechanism_is_read_as_a_failure(tmp_path: Path, capsys, text, means) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(f"{text}\n\n{PIP_LIST}")
    [own] = [f for f in findings_of(capsys, "--from", str(paste)) if f["code"] == "matrix.unknown-error"]
    assert f"what the line means: {means}" in own["evidence"]


@pytest.mark.parametrize("text", [
    "host:7436:7497 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",  # no InfiniBand: falls back
    "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'libnvinfer.so.7'",
    "it does not run out of memory on one GPU",
])
def test_benign_lines_are_not_failures(tmp_path: Path, capsys, text) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(f"{text}\n\n{PIP_LIST}")
    assert not [f for f in findings_of(capsys, "--from", str(paste)) if f["code"] == "matrix.unknown-error"]


def test_every_line_of_a_mechanism_is_a_line_the_evidence_keeps() -> None:
    """A mechanism line the evidence drops before matching could never be read ("CUDA driver version
    is insufficient ..." holds none of the generic failure words)."""
    dropped = [(m.name, " ".join(line)) for m in MECHANISMS for line in m.lines if not keeps(" ".join(line))]
    assert not dropped


# Real log lines: gpu_device.cc's warning as TensorFlow 2.3 printed it, and cudart_stub.cc's line (2.14)
# for a machine without the driver, as users' logs in public repositories show them.
DLOPEN = ("2020-08-24 11:08:28.568905: W tensorflow/core/common_runtime/gpu/gpu_device.cc:1753] Cannot dlopen "
          "some GPU libraries. Please make sure the missing libraries mentioned above are installed properly if "
          "you would like to use GPU. Follow the guide at https://www.tensorflow.org/install/gpu for how to "
          "download and setup the required libraries for your platform.")
NO_DRIVER = ("2024-06-07 23:17:16.807973: I tensorflow/tsl/cuda/cudart_stub.cc:28] Could not find cuda drivers "
             "on your machine, GPU will not be used.")


@pytest.mark.parametrize(("line", "says_library"), [(DLOPEN, True), (NO_DRIVER, False)])
def test_cannot_dlopen_says_a_library_did_not_load_and_the_driver_line_does_not(
        tmp_path: Path, capsys, line, says_library) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(f"{line}\nSkipping registering GPU devices...\n")
    [no_gpu] = [f for f in findings_of(capsys, "--from", str(paste)) if f["code"] == "pasted.no-gpu"]
    meaning = [e for e in no_gpu["evidence"] if e.startswith("what the line means:")]
    assert bool(meaning) is says_library
    assert not meaning or "a shared library could not be loaded" in meaning[0]


def test_a_traceback_alone_names_the_keras3_multi_worker_entry_of_the_bundled_matrix(tmp_path: Path, capsys) -> None:
    """The line mgpu-doctor's own multi-worker smoke printed (TensorFlow 2.21, Keras 3.15.1): no
    versions typed, the entry is named by its line."""
    paste = tmp_path / "issue.md"
    paste.write_text(TRACEBACK.replace("with MultiWorkerMirroredStrategy", "on two nodes with ray==2.30.0"))
    found = findings_of(capsys, "--from", str(paste))
    [named] = [f for f in found if f["code"] == "known-issue.keras-20585-mwms-model-fit"]
    assert named["severity"] == "warning"
    assert "the pasted text, line 9: ValueError: Attempt to convert a value (PerReplica:{" in named["evidence"]
    assert "tf-keras" in named["fix"]
    # the line's source is the project's own reproduction: named by its title, not README.md's section
    [printed] = [e for e in named["evidence"] if e.startswith("the line it prints")]
    assert printed.startswith("the line it prints (from mgpu-doctor's reproduction with TensorFlow 2.21.0")
    assert "README.md" not in printed


# tensorflow/tensorflow#41827: the warning every MirroredStrategy input pipeline of 2.3 logged
DEPRECATION = ("WARNING:tensorflow:From /usr/local/lib/python3.6/dist-packages/tensorflow/python/data/ops/"
               "multi_device_iterator_ops.py:601: get_next_as_optional (from "
               "tensorflow.python.data.ops.iterator_ops) is deprecated and will be removed in a future version.\n"
               "Instructions for updating:\nUse tf.data.Iterator.get_next_as_optional() instead.\n")


def test_a_paste_whose_only_readable_line_is_one_a_known_issue_prints_is_read(tmp_path: Path, capsys) -> None:
    """A warning is no failure line, but a known issue's signature names it: a paste, not bad input."""
    paste = tmp_path / "issue.md"
    paste.write_text(DEPRECATION)
    found = findings_of(capsys, "--from", str(paste))
    [named] = [f for f in found if f["code"] == "known-issue.tf-41827-mirrored-mixed-precision-slower-tf23"]
    assert named["severity"] == "info" and "A possible cause of the pasted text, line 1" in named["title"]


def test_a_paste_of_a_warning_no_known_issue_prints_is_still_bad_input(tmp_path: Path, capsys) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text(DEPRECATION.replace("get_next_as_optional", "make_one_shot_iterator"))
    assert main(["check", "--from", str(paste)]) == 2
    err = capsys.readouterr().err
    assert "not a paste with anything mgpu-doctor reads" in err and "a line a known issue prints" in err
