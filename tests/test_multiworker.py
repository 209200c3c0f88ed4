"""Multi-worker smoke: TF_CONFIG validation, and real MultiWorkerMirroredStrategy workers on 127.0.0.1
through `mgpu-doctor smoke --workers K` / `--tf-config`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.multiworker import MultiWorkerRun, WorkerOutcome
from mgpu_doctor.model.serde import from_jsonable
from mgpu_doctor.multiworker.findings import multiworker_outcomes, resume_run, skipped_resumes
from mgpu_doctor.multiworker.launcher import DIE_STEP_ENV, DIE_TASK_ENV, MultiWorkerResult
from mgpu_doctor.multiworker.resume import FORGET_ENV, ResumeJobs, run_local_resume
from mgpu_doctor.multiworker.tf_config import (
    TfConfig,
    TfConfigError,
    check_addresses,
    free_loopback_ports,
    local_cluster,
    parse_tf_config,
)
from mgpu_doctor.record import replace


def config(cluster, task=None) -> str:
    data = {"cluster": cluster}
    if task is not None:
        data["task"] = task
    return json.dumps(data)


TWO = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}


@pytest.mark.parametrize("text,message", [
    ("", "TF_CONFIG is empty"),
    ('{"cluster": ', "not valid JSON (line 1, column 13"),
    ("[1]", "must be a JSON object"),
    ('{"task": {"type": "worker", "index": 0}}', "has no 'cluster'"),
    (config({"worker": []}, {"type": "worker", "index": 0}), "cluster.worker must be a non-empty list"),
    (config({"trainer": ["a:1"]}, {"type": "trainer", "index": 0}), "unknown task type 'trainer'"),
    (config({"worker": ["10.0.0.1"]}, {"type": "worker", "index": 0}), "cluster.worker[0] must be 'host:port'"),
    (config({"worker": ["10.0.0.1:99999"]}, {"type": "worker", "index": 0}), "port must be 1..65535"),
    (config({"worker": ["10.0.0.1:2222", "10.0.0.1:2222"]}, {"type": "worker", "index": 0}),
     "cluster.worker[1] '10.0.0.1:2222' is also cluster.worker[0]"),
    (config({"chief": ["a:1", "b:1"], "worker": ["c:1"]}, {"type": "worker", "index": 0}),
     "cluster.chief must have exactly one address"),
    (config(TWO), "has no 'task'"),
    (config(TWO, {"type": "chief", "index": 0}), "task.type 'chief' is not in the cluster (worker)"),
    (config(TWO, {"type": "worker", "index": "1"}), "task.index must be an integer, got '1'"),
    (config(TWO, {"type": "worker", "index": 2}), "task.index 2 is out of range: cluster.worker has 2 address(es), so 0..1"),
])
def test_malformed_tf_config_is_one_clear_line(text, message):
    with pytest.raises(TfConfigError) as err:
        parse_tf_config(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_valid_tf_config():
    parsed = parse_tf_config(config({"chief": ["[::1]:2221"], **TWO}, {"type": "worker", "index": 1}))
    assert (parsed.own_address, parsed.num_workers) == ("10.0.0.2:2222", 3)
    assert parse_tf_config(parsed.to_json()) == parsed


def test_port_in_use_is_reported():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = TfConfig({"worker": [f"127.0.0.1:{port}"]}, "worker", 0)
        with pytest.raises(TfConfigError, match=f"port {port} is already in use on 127.0.0.1"):
            check_addresses(cfg)


def test_port_of_a_finished_run_is_free_again():
    """The server side of a closed connection stays in TIME_WAIT for a minute: the next run on
    that port (the README's Slurm recipe run twice) must not be refused, as TensorFlow is not."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC's server does
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            served, _ = listener.accept()
            served.close()  # the server closes first: its end, on `port`, goes to TIME_WAIT
            client.recv(1)
    with socket.socket() as probe, pytest.raises(OSError):  # what the check saw before: taken
        probe.bind(("127.0.0.1", port))
    check_addresses(TfConfig({"worker": [f"127.0.0.1:{port}"]}, "worker", 0))


def test_address_of_another_machine_is_reported():
    cfg = TfConfig({"worker": ["192.0.2.10:2222", "127.0.0.1:2223"]}, "worker", 0)  # TEST-NET-1
    with pytest.raises(TfConfigError, match="192.0.2.10 is not an address of this machine"):
        check_addresses(cfg)


def test_unresolvable_host_is_reported():
    def resolver(host: str) -> list[str]:
        if host == "node-b.cluster":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return ["127.0.0.1"]

    cfg = TfConfig({"worker": ["127.0.0.1:1", "node-b.cluster:2222"]}, "worker", 0)
    with pytest.raises(TfConfigError, match=r"cluster.worker\[1\] host 'node-b.cluster' does not resolve"):
        check_addresses(cfg, resolver)


def test_local_cluster_ports_are_distinct_and_free():
    configs = local_cluster(3)
    addresses = configs[0].cluster["worker"]
    assert len(set(addresses)) == 3 and [c.task_index for c in configs] == [0, 1, 2]
    for c in configs:
        check_addresses(c)


# --- TF_CONFIG through the command line: exit 2, one line, before any worker starts --------


def smoke(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["smoke", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_tf_config_problems_are_one_line_and_exit_2(capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    local = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}
    for argv, message in [
        (["--tf-config", '{"cluster": '], "--tf-config is not valid JSON"),
        (["--tf-config", config(local, {"type": "worker", "index": 2})], "task.index 2 is out of range"),
        (["--tf-config", config({"worker": ["127.0.0.1:2222"] * 2}, {"type": "worker", "index": 0})],
         "cluster.worker[1] '127.0.0.1:2222' is also cluster.worker[0]"),
        (["--tf-config", config({"worker": ["192.0.2.10:2222", "127.0.0.1:2223"]}, {"type": "worker", "index": 0})],
         "192.0.2.10 is not an address of this machine"),
        (["--tf-config", config({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]}, {"type": "ps", "index": 0})],
         "runs chief and worker tasks only"),
        (["--tf-config", "@/nonexistent/tf_config.json"], "cannot read /nonexistent/tf_config.json"),
        (["--workers", "2", "--tf-config", config(local, {"type": "worker", "index": 0})], "give one of them"),
        (["--workers", "1"], "--workers takes a number from 2 to 32 (each worker is a process importing TensorFlow on this host), got 1"),
        (["--workers", "2", "--gpus", "2"], "--gpus applies to the single-host smoke, not with --workers"),
        (["--workers", "2", "--layers", "dense,mlp"], "unknown layer 'mlp'"),
    ]:
        code, out, err = smoke(capsys, *argv)
        assert (code, out) == (2, ""), (argv, err)
        assert message in err and err.count("\n") == 1, (argv, err)


def test_port_in_use_and_tf_config_from_the_environment(capsys, monkeypatch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setenv("TF_CONFIG", config({"worker": [f"127.0.0.1:{port}", "127.0.0.1:1"]},
                                               {"type": "worker", "index": 0}))
        code, _, err = smoke(capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"port {port} is already in use on 127.0.0.1" in err
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1"]}}')
    code, _, err = smoke(capsys)
    assert code == 2 and "TF_CONFIG (from the environment; unset it for the single-host smoke) has no 'task'" in err


# --- real workers -------------------------------------------------------------------------


def processes_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def report_schema() -> dict:
    return json.loads((Path(__file__).resolve().parent.parent / "mgpu_doctor/schemas/report.schema.json").read_text())


@pytest.mark.slow
@pytest.mark.tensorflow
def test_two_workers_with_the_default_keras_and_with_tf_keras(capsys, monkeypatch, tmp_path):
    """What each Keras does under MultiWorkerMirroredStrategy, through `smoke --workers 2 --keras both`.

    With TensorFlow 2.21 / Keras 3.15, Keras 3's model.fit fails converting a PerReplica value
    (keras-team/keras#20585). If a Keras release fixes it, this test fails and the finding's
    wording must be revisited. tf-keras trains and both workers end with identical weights.
    """
    monkeypatch.delenv("TF_CONFIG", raising=False)
    started = time.monotonic()
    code, out, err = smoke(capsys, "--workers", "2", "--keras", "both", "--format", "json",
                           "--junit", str(tmp_path / "junit.xml"), "--stall-timeout", "60")
    print(f"smoke --workers 2 --keras both: {time.monotonic() - started:.1f} s")
    data = json.loads(out)
    jsonschema.Draft202012Validator(report_schema()).validate(data)
    assert code == 1, err
    checks = {c["name"]: c for c in data["checks"]}
    default, legacy = (checks["smoke/multiworker/dense/2workers/default"],
                       checks["smoke/multiworker/dense/2workers/tf-keras"])
    assert default["status"] == "failed"
    assert [f["code"] for f in default["findings"]] == ["multiworker.keras3-fit-unsupported"]
    assert "pip install 'tf-keras~=2.21.0'" in default["findings"][0]["fix"]
    assert legacy["status"] == "passed" and legacy["findings"][0]["code"] == "multiworker.dense.ok"
    runs = [from_jsonable(MultiWorkerRun, r) for r in data["multiworker_runs"]]
    assert [(r.keras, r.status, r.mode) for r in runs] == [("default", "error", "local"), ("tf-keras", "ok", "local")]
    failing = [w for w in runs[0].worker_outcomes if w.status == "error"]
    assert failing and all(w.phase == "fit" and "PerReplica" in w.summary for w in failing)
    assert {w.keras.split()[0] for w in runs[0].worker_outcomes if w.keras} == {"keras"}
    assert runs[1].framework.startswith("tf_keras ") and runs[1].weights_identical is True
    assert runs[1].max_weight_difference == 0.0
    w0, w1 = runs[1].worker_outcomes
    assert w0.loss == w1.loss and len(w0.loss) == 2 and w0.weight_spread == w1.weight_spread == 0.0
    assert (w0.replicas, w0.local_gpus) == (2, 0)
    assert "smoke/multiworker/dense/2workers/tf-keras" in (tmp_path / "junit.xml").read_text()
    assert f"Multi-worker smoke: tf.keras was {runs[0].framework} (TF_USE_LEGACY_KERAS unset)." in data["notes"]


@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_worker_dying_mid_training_is_reported_and_nothing_is_left_behind(capsys, monkeypatch):
    marker = uuid.uuid4().hex
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv("MGPU_DOCTOR_TEST_MARK", marker)
    monkeypatch.setenv(DIE_TASK_ENV, "1")
    monkeypatch.setenv(DIE_STEP_ENV, "2")
    started = time.monotonic()
    code, out, err = smoke(capsys, "--workers", "2", "--keras", "tf-keras", "--format", "json")
    took = time.monotonic() - started
    assert processes_with(marker) == []  # /proc/PID/environ: the environment a process started with
    data = json.loads(out)
    assert code == 1, err
    [check] = data["checks"]
    assert check["name"] == "smoke/multiworker/dense/2workers/tf-keras" and check["status"] == "failed"
    assert check["findings"][0]["code"] == "multiworker.dense.crash"
    assert check["findings"][0]["evidence"][:2] == ["worker 1: crashed with SIGKILL",
                                                    "worker 0: stopped by the launcher after worker 1 failed"]
    [run] = data["multiworker_runs"]
    assert run["status"] == "crash" and [w["status"] for w in run["worker_outcomes"]] == ["stopped", "crash"]
    assert took < 60  # stopped promptly, not after the stall timeout


@pytest.mark.slow
@pytest.mark.tensorflow
def test_one_task_per_node_with_the_schedulers_tf_config(tmp_path):
    """Two `mgpu-doctor smoke` processes, one per task, as srun or a Kubernetes Job would start them."""
    configs = local_cluster(2)
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1"}
    env.pop("TF_CONFIG", None)
    procs = [subprocess.Popen(
        [sys.executable, "-m", "mgpu_doctor", "smoke", "--format", "json", "--stall-timeout", "60"],
        env={**env, "TF_CONFIG": c.to_json()}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in configs]
    outputs = [p.communicate(timeout=180) for p in procs]
    for i, (out, err) in enumerate(outputs):
        assert procs[i].returncode == 0, err
        data = json.loads(out)
        [check] = data["checks"]
        assert check["name"] == f"smoke/multiworker/dense/task{i}-of-2" and check["status"] == "passed"
        [run] = data["multiworker_runs"]
        assert (run["mode"], run["keras"], run["workers"]) == ("task", "env", 2)
        [worker] = run["worker_outcomes"]
        assert worker["task_index"] == i and worker["keras"].startswith("tf_keras")
        assert run["max_weight_difference"] == 0.0  # from the worker's own all-gather over both tasks


@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_peer_that_never_starts_is_a_hang_with_the_stack_not_a_hang_of_the_doctor(capsys, monkeypatch):
    own, absent = (f"127.0.0.1:{port}" for port in free_loopback_ports(2))
    monkeypatch.setenv("TF_CONFIG", config({"worker": [own, absent]}, {"type": "worker", "index": 0}))
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    started = time.monotonic()
    code, out, err = smoke(capsys, "--stall-timeout", "15", "--format", "json")
    assert code == 1 and time.monotonic() - started < 60, err
    data = json.loads(out)
    [check] = data["checks"]
    assert check["name"] == "smoke/multiworker/dense/task0-of-2"
    assert [f["code"] for f in check["findings"]] == ["multiworker.dense.hang"]  # no "not in the matrix"
    evidence = "\n".join(check["findings"][0]["evidence"])
    assert "collective_all_reduce_strategy.py" in evidence, evidence  # waiting for the peer, with the stack
    assert data["multiworker_runs"][0]["worker_outcomes"][0]["status"] == "hang"


def test_findings_for_weights_that_differ_a_stall_and_a_nan():
    def run(*workers: WorkerOutcome, difference: float | None = None) -> MultiWorkerRun:
        return MultiWorkerRun("dense", "", 2, "local", "tf-keras", "x", list(workers),
                              max_weight_difference=difference,
                              weights_identical=None if difference is None else difference <= 1e-5)

    ok = [WorkerOutcome(i, "ok", "trained 8 steps", keras="tf_keras 2.21.0", loss=[1.0]) for i in range(2)]
    [differ] = multiworker_outcomes([run(*ok, difference=1e-3)])
    assert differ.status is CheckStatus.FAILED and differ.name == "smoke/multiworker/dense/2workers/tf-keras"
    assert differ.findings[0].code == "multiworker.dense.weights-differ"
    assert "largest difference of one weight between workers: 0.001" in differ.findings[0].evidence[-1]
    stalled = WorkerOutcome(0, "hang", "stopped making progress and was killed after 61 s", phase="model",
                            stacks='Thread 0x1 (most recent call first):\n  File "w.py", line 50 in main')
    stopped = WorkerOutcome(1, "stopped", "stopped by the launcher after worker 0 failed")
    [outcome] = multiworker_outcomes([run(stalled, stopped)])
    [finding] = outcome.findings
    assert finding.code == "multiworker.dense.hang" and finding.severity is Severity.ERROR
    assert finding.evidence[0] == "worker 0: stopped making progress and was killed after 61 s (during model)"
    assert finding.evidence[-1] == '  File "w.py", line 50 in main'
    keras3 = [WorkerOutcome(i, "error", "ValueError: Attempt to convert a value (PerReplica:{ ...", phase="fit",
                            keras="keras 3.15.1", tensorflow="2.21.0") for i in range(2)]
    from mgpu_doctor.matrix.known_issues import load_matrix
    from mgpu_doctor.matrix.paths import bundled_matrix_dir

    issues = load_matrix(bundled_matrix_dir()).issues
    [outcome] = multiworker_outcomes([run(*keras3)], issues)
    [finding] = outcome.findings  # both workers failed alike: one finding
    assert finding.code == "multiworker.keras3-fit-unsupported"
    # the entry's own line decides, one source of truth: another error in fit is the worker's own,
    # and so is this one where the matrix does not hold the entry
    other = [replace(w, summary="ValueError: Attempt to convert a value (Mirrored:{ ...") for w in keras3]
    codes = [f.code for f in multiworker_outcomes([run(*other)], issues)[0].findings]
    assert codes == ["multiworker.dense.error"] * 2
    without = [i for i in issues if i.id != "keras-20585-mwms-model-fit"]
    assert multiworker_outcomes([run(*keras3)], without)[0].findings[0].code == "multiworker.dense.error"
    assert [e.split(":")[0] for e in finding.evidence] == ["worker 0", "worker 1", "Keras", "known issue"]
    # `smoke --workers` and `matrix query` tell one story: the finding names the matrix entry,
    # which carries the finding's source and matches the versions the workers ran
    from mgpu_doctor.matrix.environment import environment_from_mapping
    from mgpu_doctor.matrix.known_issues import known_issue_line, load_matrix
    from mgpu_doctor.matrix.match import Verdict, assess
    from mgpu_doctor.matrix.paths import bundled_matrix_dir
    from mgpu_doctor.multiworker.findings import KERAS3_MWMS_ENTRY, KERAS3_MWMS_ISSUE

    entry = load_matrix(bundled_matrix_dir()).get(KERAS3_MWMS_ENTRY)
    assert entry is not None and KERAS3_MWMS_ISSUE in [s.url for s in entry.sources]
    assert finding.evidence[-1] == known_issue_line(entry.id) and KERAS3_MWMS_ISSUE in finding.links
    ran = environment_from_mapping({"tensorflow": "2.21.0", "keras": "3.15.1", "workers": 2})
    assert assess(entry, ran).verdict is Verdict.MATCHES
    nan = WorkerOutcome(1, "nan", "trained 8 steps; the loss or the weights became NaN/Inf", loss=[1.0, None])
    [outcome] = multiworker_outcomes([run(ok[0], nan)])
    assert [f.code for f in outcome.findings] == ["multiworker.dense.nan"]
    assert "loss per epoch: 1.0000, nan" in outcome.findings[0].evidence


def _python_without_tf_keras(tmp_path: Path) -> str:
    """A virtual environment that sees this one's packages except tf-keras (the real ones)."""
    import site
    import venv

    env_dir = tmp_path / "no-tf-keras"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    view = tmp_path / "view"
    view.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if not entry.name.startswith(("tf_keras", "tf-keras")):
            (view / entry.name).symlink_to(entry)
    python = env_dir / "bin" / "python"
    own_site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    Path(own_site, "view.pth").write_text(str(view) + "\n")
    return str(python)


def test_legacy_keras_without_tf_keras_is_named_as_check_names_it_and_nothing_runs(tmp_path):
    """TF_USE_LEGACY_KERAS=1 and no tf-keras: `tf.keras` fails in every worker. The report says that
    (the `keras` check's finding), not TensorFlow's generic ImportError filed under Keras 3."""
    python = _python_without_tf_keras(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env["TF_USE_LEGACY_KERAS"] = "1"
    done = subprocess.run([sys.executable, "-m", "mgpu_doctor", "smoke", "--workers", "2", "--python", python,
                           "--format", "json"], capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    [check] = data["checks"]
    [finding] = check["findings"]
    assert finding["code"] == "keras.legacy-without-tf-keras" and finding["severity"] == "error"
    assert finding["fix"] == "pip install 'tf-keras~=2.21.0'"
    assert data["multiworker_runs"] == []  # no worker started: no ImportError, no Keras 3 verdict
    quick = subprocess.run([sys.executable, "-m", "mgpu_doctor", "check", "--quick", "--python", python,
                            "--format", "json"], capture_output=True, text=True, timeout=120, env=env,
                           stdin=subprocess.DEVNULL)
    codes = {f["code"] for c in json.loads(quick.stdout)["checks"] for f in c["findings"]}
    assert finding["code"] in codes  # the same finding as `check --quick`


def test_a_worker_that_lost_its_peer_is_told_to_look_at_the_peer():
    lost = WorkerOutcome(0, "error", "raised UnavailableError", phase="fit",
                         error_message="UnavailableError: Collective ops is aborted by: failed to connect to "
                         "all addresses ... /job:worker/replica:0/task:1 connection reset by peer")
    crashed = WorkerOutcome(1, "crash", "crashed with SIGKILL", signal="SIGKILL")
    run = MultiWorkerRun("dense", "", 2, "tf-config", "tf-keras", "error", [lost, crashed])
    [outcome] = multiworker_outcomes([run])
    by_code = {f.code: f for f in outcome.findings}
    assert "multiworker.dense.lost-peer" in by_code and "multiworker.dense.crash" in by_code
    lost_finding = by_code["multiworker.dense.lost-peer"]
    assert "/job:worker/replica:0/task:1" in lost_finding.title
    assert "other worker first" in lost_finding.fix and "versions" not in lost_finding.fix


# --- the resume test: BackupAndRestore, a worker killed in epoch 2, the job restarted ---------


@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_job_restarted_after_a_killed_worker_resumes_from_its_backup(capsys, monkeypatch, tmp_path):
    """`smoke --workers 2 --level long`: the training, then the resume test's three jobs."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv(FORGET_ENV, raising=False)
    marker = uuid.uuid4().hex
    monkeypatch.setenv("MGPU_DOCTOR_TEST_MARK", marker)
    started = time.monotonic()
    code, out, err = smoke(capsys, "--workers", "2", "--keras", "tf-keras", "--level", "long",
                           "--format", "json", "--junit", str(tmp_path / "junit.xml"), "--stall-timeout", "60")
    print(f"smoke --workers 2 --level long: {time.monotonic() - started:.1f} s")
    assert processes_with(marker) == []
    data = json.loads(out)
    jsonschema.Draft202012Validator(report_schema()).validate(data)
    assert code == 0, err
    assert data["level"] == "long"
    checks = {c["name"]: c for c in data["checks"]}
    resumed = checks["smoke/multiworker/dense/2workers/tf-keras/resume"]
    assert checks["smoke/multiworker/dense/2workers/tf-keras"]["status"] == "passed"
    assert resumed["status"] == "passed", resumed
    [finding] = resumed["findings"]
    assert finding["code"] == "multiworker.dense.ok"
    assert "killed in epoch 2" in finding["title"] and "resumed from the BackupAndRestore backup at epoch 2" in finding["title"]
    runs = [from_jsonable(MultiWorkerRun, r) for r in data["multiworker_runs"]]
    assert [r.kind for r in runs] == ["train", "resume"]
    run = runs[1]
    assert run.status == "ok" and run.resume is not None
    resume = run.resume
    assert (resume.stage, resume.killed_task, resume.killed_in_epoch, resume.resumed_at_epoch) == ("restarted", 1, 2, 1)
    assert resume.killed_job == ["worker 0: stopped by the launcher after worker 1 failed",
                                 "worker 1: crashed with SIGKILL"]
    assert resume.stopped_after_s is not None and resume.stopped_after_s < 10  # not the stall timeout
    assert resume.max_abs_diff is not None and resume.max_abs_diff <= resume.tolerance
    assert resume.max_abs_reference and resume.max_abs_reference > 0
    assert [w.epochs_begun for w in run.worker_outcomes] == [[1], [1]]  # every restarted worker
    assert set(resume.job_seconds) == {"reference", "killed", "restarted"} and not resume.backup_lost
    assert [w.epochs_begun for w in runs[0].worker_outcomes] == [[0, 1], [0, 1]]
    assert any(n.startswith("Multi-worker resume test (dense)") for n in data["notes"])
    assert "smoke/multiworker/dense/2workers/tf-keras/resume" in (tmp_path / "junit.xml").read_text()


@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_restart_that_lost_its_backup_is_reported_as_restarted_from_scratch(monkeypatch, tmp_path):
    from mgpu_doctor.process.interpreter import Interpreter

    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv(FORGET_ENV, "1")
    jobs = run_local_resume(Interpreter.current(), 2, legacy_keras=True, stall_timeout_s=60, scratch=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the scratch directory (the backups) is gone
    assert jobs.backup_lost and jobs.kill_went_as_planned and jobs.restarted is not None
    run = resume_run(jobs, layer="dense", workers=2, keras="tf-keras")
    assert run.status == "resume-failed" and run.resume is not None and run.resume.resumed_at_epoch == 0
    [outcome] = multiworker_outcomes([run])
    assert outcome.status is CheckStatus.FAILED
    [finding] = outcome.findings
    assert finding.code == "multiworker.dense.restarted-from-scratch" and finding.severity is Severity.ERROR
    assert "began again at epoch 1" in finding.title
    assert "worker 0: 1, 2; worker 1: 1, 2" in "\n".join(finding.evidence)
    assert "shared file system" in finding.fix and "backup_dir" in finding.fix


def _worker(index: int, status: str = "ok", *, epochs: list[int] | None = None, summary: str = "trained",
            signal: str = "", duration_s: float = 6.0) -> WorkerOutcome:
    return WorkerOutcome(index, status, summary, keras="tf_keras 2.21.0", loss=[0.5], signal=signal,
                         epochs_begun=epochs or [], duration_s=duration_s)


def _job(*workers: WorkerOutcome, weights: dict[int, list[float]] | None = None) -> MultiWorkerResult:
    return MultiWorkerResult(list(workers), True, 7.0, weights or {})


REFERENCE = _job(_worker(0, epochs=[0, 1]), _worker(1, epochs=[0, 1]), weights={0: [0.5, -2.0], 1: [0.5, -2.0]})
KILLED = _job(_worker(0, "stopped", summary="stopped by the launcher after worker 1 failed", duration_s=7.0),
              _worker(1, "crash", summary="crashed with SIGKILL", signal="SIGKILL"))


def _restarted(epochs: list[int], weights: list[float]) -> MultiWorkerResult:
    return _job(_worker(0, epochs=epochs), _worker(1, epochs=epochs), weights={0: weights, 1: weights})


def test_resume_findings_for_every_way_it_can_go():
    def judged(jobs: ResumeJobs) -> tuple[MultiWorkerRun, list]:
        run = resume_run(jobs, layer="dense", workers=2, keras="tf-keras")
        [outcome] = multiworker_outcomes([run])
        assert outcome.name == "smoke/multiworker/dense/2workers/tf-keras/resume"
        return run, outcome.findings

    run, [ok] = judged(ResumeJobs(REFERENCE, KILLED, _restarted([1], [0.5, -2.0])))
    assert run.status == "ok" and ok.code == "multiworker.dense.ok"
    assert "the launcher stopped the other workers 1.0 s after worker 1 died" in ok.evidence
    # within the tolerance 1e-5 x max(1, |w|max = 2): equal; beyond it: other weights
    run, [ok] = judged(ResumeJobs(REFERENCE, KILLED, _restarted([1], [0.5, -2.0 + 1.9e-5])))
    assert run.status == "ok"
    run, [differs] = judged(ResumeJobs(REFERENCE, KILLED, _restarted([1], [0.5, -2.0 + 2.1e-5])))
    assert run.status == "resume-failed" and differs.code == "multiworker.dense.resume-differs"
    assert any("largest final-weight difference to the uninterrupted reference: 2.1e-05 (tolerance 2e-05"
               in e for e in differs.evidence)
    assert "save_freq" in differs.fix
    _, findings = judged(ResumeJobs(REFERENCE, KILLED, _restarted([0, 1], [0.5, -2.0])))
    assert [f.code for f in findings] == ["multiworker.dense.restarted-from-scratch"]
    # the workers of the restart disagree: not comparable
    split = _job(_worker(0, epochs=[1]), _worker(1, epochs=[0, 1]), weights={0: [0.5, -2.0], 1: [0.5, -2.0]})
    _, [failed] = judged(ResumeJobs(REFERENCE, KILLED, split))
    assert failed.code == "multiworker.dense.resume-failed"
    assert failed.evidence[0] == "the restarted workers began at different epochs: worker 0: 2, worker 1: 1"
    # nobody died: the test did not run as planned
    run, [failed] = judged(ResumeJobs(REFERENCE, REFERENCE))
    assert run.status == "resume-failed" and failed.code == "multiworker.dense.resume-failed"
    assert "worker 1 was not killed in epoch 2 as planned" in failed.evidence[0]
    # a job's own failure is that failure's finding, said to be the resume test's
    crashed = _job(_worker(0, "crash", summary="crashed with SIGSEGV", signal="SIGSEGV"),
                   _worker(1, "stopped", summary="stopped by the launcher after worker 0 failed"))
    run, [crash] = judged(ResumeJobs(crashed))
    assert run.status == "crash" and run.resume is not None and run.resume.stage == "reference"
    assert crash.code == "multiworker.dense.crash"
    assert crash.title.endswith("(resume test, the uninterrupted reference job)")
    assert crash.evidence[0] == "during the resume test, the uninterrupted reference job"


def test_the_resume_test_follows_the_level_and_is_skipped_after_a_failed_training(capsys, monkeypatch):
    from argparse import Namespace

    from mgpu_doctor.cli.smoke_workers import plan_from
    from mgpu_doctor.smoke_pipeline import plan_notes

    monkeypatch.delenv("TF_CONFIG", raising=False)
    args = Namespace(workers=2, tf_config=None, layers=None, keras="both")
    assert plan_from(args, {}, "standard").resume_runs() == []
    plan = plan_from(args, {}, "long")
    assert plan.resume_runs() == [("dense", "", "default"), ("dense", "", "tf-keras")]
    assert plan.planned() == 4
    assert plan_from(Namespace(workers=2, tf_config=None, layers="conv2d", keras="env"), {}, "long").resume_runs() == []
    task = plan_from(Namespace(workers=None, tf_config=None, layers=None, keras="env"),
                     {"TF_CONFIG": local_cluster(2)[0].to_json()}, "long")
    assert task.resume_runs() == []
    assert "The resume test runs with --workers K only" in plan_notes(task, "long")[-1]
    failed = MultiWorkerRun("dense", "", 2, "local", "default", "error", [_worker(0, "error")])
    [skipped] = skipped_resumes(plan.resume_runs(), [failed])
    assert skipped.name == "smoke/multiworker/dense/2workers/default/resume"
    assert skipped.status is CheckStatus.SKIPPED
    assert skipped.skip_reason == "the training itself did not pass (smoke/multiworker/dense/2workers/default: error)"


def test_a_tf_keras_run_is_not_explained_by_a_keras_3_entry():
    """The matrix lookup sees the Keras the run trained with, not this shell's `keras` package."""
    from mgpu_doctor.matrix.environment import environment_from_mapping
    from mgpu_doctor.smoke.known_issues import run_environment

    machine = environment_from_mapping({"tensorflow": "2.21.0", "keras": "3.15.1"})
    run = MultiWorkerRun("dense", "", 2, "local", "tf-keras", "resume-failed", [_worker(0)],
                         framework="tf_keras 2.21.0", kind="resume")
    env = run_environment(machine, run, "multi_worker_mirrored")
    assert "keras" not in env.versions and "tf_keras 2.21.0" in env.missing["keras"]
    # a resume trains on full batches: "even" in the matrix's words (its scenarios are the batch shapes)
    assert (env.usage, env.scenario, env.workers) == (("checkpoint",), "even", 2)
    keras3 = replace(run, framework="keras 3.15.1", keras="default")
    assert run_environment(machine, keras3, "multi_worker_mirrored").versions["keras"] == "3.15.1"
