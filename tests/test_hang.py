"""`mgpu-doctor hang`: real processes that hang (and one that is merely slow) read with the real
py-spy; only the py-spy executable, its stderr and NVML are faked, at their boundaries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.errors import BadInput
from mgpu_doctor.hang import discover, procfs
from mgpu_doctor.hang.classify import process_wait
from mgpu_doctor.hang.gpus import gpu_holders
from mgpu_doctor.hang.pyspy import PySpy, find_pyspy, ptrace_hint
from mgpu_doctor.hang.read import read_job
from mgpu_doctor.hang.section import HangRequest, read_hang
from mgpu_doctor.hang.verdict import hang_outcome
from mgpu_doctor.matrix.known_issues import load_matrix, parse_issue
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.hang import Frame, HangReading, ProcessReading, ThreadStack
from mgpu_doctor.multiworker.launcher import worker_env
from mgpu_doctor.multiworker.tf_config import local_cluster
from tests.fake_nvml import FakeGpu, FakeMachine, FakeNvml

JOBS = Path(__file__).parent / "data" / "hang_jobs"
READY_TIMEOUT_S = 120.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and ptrace")


def pyspy_or_skip() -> str:
    try:
        return find_pyspy()
    except Exception as exc:  # the [hang] extra is not installed: the fakes below still run
        pytest.skip(str(exc))


@contextmanager
def job(*commands: tuple[list[str], dict[str, str] | None], ready: bool = True):
    """Start processes in their own process groups; wait for each to print "ready"; kill every group
    at the end, whatever happens (a stopped process is killed as well)."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for argv, env in commands:
            procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True, start_new_session=True))
        if ready:
            deadline = time.monotonic() + READY_TIMEOUT_S
            for proc in procs:
                assert proc.stdout is not None
                line = ""
                while "ready" not in line:
                    assert time.monotonic() < deadline and proc.poll() is None, "the job never got ready"
                    line = proc.stdout.readline()
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=30)


def wait_for_state(pid: int, state: str) -> None:
    deadline = time.monotonic() + 10
    while procfs.read_stat(pid).state != state:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def python(code: str) -> tuple[list[str], None]:
    return [sys.executable, "-c", textwrap.dedent(code)], None


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def verdict_of(pids: list[int], interval_s: float = 1.0):
    reading = read_hang(HangRequest(tuple(pids), interval_s=interval_s))
    outcome = hang_outcome(reading, load_matrix(bundled_matrix_dir()).issues)
    return reading, outcome.findings[0]


# -- real processes without TensorFlow ---------------------------------------------------------

LOCKED = """
    import threading
    lock = threading.Lock()
    lock.acquire()
    t = threading.Thread(target=lock.acquire, name="consumer")
    t.start()
    print("ready", flush=True)
    t.join()
"""
BUSY = """
    print("ready", flush=True)
    x = 0
    while True:
        x = (x * 31 + 7) % 1000003
"""


def test_a_thread_waiting_on_a_lock_is_a_lock_wait(capsys):
    pyspy_or_skip()
    with job(python(LOCKED)) as (pid,):
        code, out, _ = run_cli(capsys, "hang", str(pid), "--interval", "0.5", "--no-redact")
    assert code == 1
    assert f"PID {pid} waits in a lock, event or queue" in out
    # the main thread joins the consumer, which waits in a bare lock.acquire() (no Python frame of its own)
    assert "Thread._wait_for_tstate_lock (threading.py" in out


def test_a_busy_process_is_no_hang(capsys):
    pyspy_or_skip()
    with job(python(BUSY)) as (pid,):
        code, out, _ = run_cli(capsys, "hang", str(pid), "--interval", "0.5")
    assert code == 0
    assert f"No hang: PID {pid} computes (CPU time moves)" in out


def test_a_stopped_process_is_named_and_read_without_pausing_it(capsys):
    pyspy_or_skip()
    with job(python(LOCKED), python(LOCKED)) as (a, b):
        os.kill(b, signal.SIGSTOP)
        wait_for_state(b, "T")
        reading, finding = verdict_of([a, b], interval_s=0.5)
        assert procfs.read_stat(b).state == "T"  # still stopped: the dump did not resume it
    assert finding.code == "hang.stopped"
    assert finding.title.startswith(f"PID {b} is stopped (state T); PID {a} waits in a lock")
    assert f"kill -CONT {b}" in finding.fix
    stopped = next(p for p in reading.processes if p.pid == b)
    assert isinstance(stopped.threads, list) and stopped.threads  # read with --nonblocking


def test_a_process_that_exits_is_gone():
    pyspy_or_skip()
    with job(python("print('ready', flush=True)")) as (pid,):
        time.sleep(0.5)
        reading = read_job([pid], "the PIDs given", PySpy(find_pyspy()), {}, interval_s=0.2)
    assert reading.processes[0].state in ("Z", "gone")
    assert hang_outcome(reading).findings[0].code == "hang.exited"


def test_eight_processes_are_read_in_parallel_within_five_seconds():
    pyspy_or_skip()
    with job(*[python(LOCKED) for _ in range(8)]) as pids:
        begun = time.monotonic()
        reading = read_hang(HangRequest(tuple(pids), interval_s=0.5))
        took = time.monotonic() - begun
    assert all(isinstance(p.threads, list) and p.threads for p in reading.processes)
    assert took < 5.0, took
    assert max(p.dump_s for p in reading.processes) < 2.0


# -- what keeps py-spy from working: one line each ---------------------------------------------

def fake_pyspy(tmp_path: Path, stderr: str, code: int = 1) -> str:
    """A py-spy that prints what the real one prints in that case (its --version too)."""
    path = tmp_path / "py-spy"
    path.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'py-spy 0.4.3'; exit 0; fi\n"
                    f"echo {json.dumps(stderr)} >&2\nexit {code}\n")
    path.chmod(0o755)
    return str(path)


def test_missing_pyspy_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # nothing beside it
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = run_cli(capsys, "hang", str(os.getpid()))
    assert code == 2 and out == ""
    lines = [line for line in err.splitlines() if line.startswith("mgpu-doctor: error")]
    assert lines == ["mgpu-doctor: error: py-spy is not installed (it reads the running processes' stacks): "
                     "pip install 'mgpu-doctor[hang]' (or: pip install py-spy)"]


def test_denied_ptrace_is_one_line_with_the_fix(tmp_path):
    # What py-spy 0.4.3 prints when the kernel refuses (run as nobody against a root process).
    spy = PySpy(fake_pyspy(tmp_path, "Permission Denied: Try running again with elevated permissions by "
                                     "going 'sudo env \"PATH=$PATH\" !!'"))
    with job(python(LOCKED)) as (pid,):
        reading = read_job([pid], "the PIDs given", spy, {}, interval_s=0.2)
    findings = hang_outcome(reading).findings
    unreadable = [f for f in findings if f.code == "hang.stacks-unreadable"]
    assert len(unreadable) == 1
    assert unreadable[0].title.startswith(f"Stacks not read for PID {pid}: ptrace of PID {pid} not allowed "
                                          "(Permission Denied: ")
    assert "run mgpu-doctor as the job's user, or with sudo" in unreadable[0].title
    assert "\n" not in unreadable[0].title


def test_ptrace_hint_names_the_scope_and_the_capability(tmp_path):
    scope, status = tmp_path / "ptrace_scope", tmp_path / "status"
    scope.write_text("1\n")
    status.write_text("Name:\tx\nCapEff:\t00000000a80425fb\n")  # docker's default set: no CAP_SYS_PTRACE
    hint = ptrace_hint(scope, status)
    assert "kernel.yama.ptrace_scope is 1 (only a parent may trace its children)" in hint
    assert "--cap-add SYS_PTRACE" in hint
    status.write_text("CapEff:\t000001ffffffffff\n")
    assert "SYS_PTRACE" not in ptrace_hint(tmp_path / "absent", status)


def test_slurm_without_scontrol_is_one_line():
    with pytest.raises(BadInput, match=r"^--slurm-job needs Slurm's scontrol, which is not on PATH here: .*"
                                       r"srun --overlap --jobid 42 "):
        discover.slurm_job("42", which=lambda name: None)


def test_slurm_job_reads_scontrol_listpids():
    pyspy_or_skip()
    with job(python(LOCKED)) as (pid,):
        listing = f"PID      JOBID    STEPID   LOCALID GLOBALID\n{pid} 42 0 0 0\n1 42 batch - -\n"
        done = subprocess.CompletedProcess(["scontrol"], 0, listing, "")
        targets = discover.slurm_job("42", runner=lambda argv: done, which=lambda name: "/usr/bin/scontrol")
    assert targets.pids == [pid] and targets.found_by == "Slurm job 42"  # PID 1 is not a Python


def test_nvml_finds_the_python_processes_that_hold_gpus():
    with job(python(LOCKED)) as (pid,):
        machine = FakeMachine(gpus=[FakeGpu(processes=[(pid, 3 * 2**30), (1, 2**20)]), FakeGpu(utilisation=None)])
        holders = gpu_holders(FakeNvml(machine))
        targets = discover.found(holders)
    # The GPU holder that is no Python process (PID 1) is not taken; other jobs on this machine that
    # carry a TF_CONFIG (a test suite running beside this one) may be found too.
    assert pid in targets.pids and 1 not in targets.pids and targets.found_by.startswith("NVML")
    assert holders[pid][0].used_memory_bytes == 3 * 2**30 and holders[pid][0].utilisation_percent == 37


# -- the verdict, pure -------------------------------------------------------------------------

STEP = [Frame("quick_execute", "tensorflow/python/eager/execute.py", 53),
        Frame("Function.__call__", "tensorflow/python/eager/polymorphic_function/polymorphic_function.py", 833),
        Frame("<module>", "train.py", 31)]


def reading(*processes: ProcessReading) -> HangReading:
    return HangReading("the PIDs given", list(processes))


def worker(index: int, state: str, cpu: float, frames: list[Frame]) -> ProcessReading:
    pid = 100 + index
    return ProcessReading(pid, f"worker {index}", "python train.py", state, cpu, 1.0,
                          [ThreadStack("MainThread", pid, False, frames)])


def test_the_stopped_worker_is_named_and_the_others_wait_in_the_all_reduce():
    outcome = hang_outcome(reading(worker(0, "S", 0.01, STEP), worker(1, "T", 0.0, STEP),
                                   worker(2, "S", 0.0, STEP)))
    assert outcome.findings[0].title == ("worker 1 (PID 101) is stopped (state T); workers 0 and 2 (PIDs 100 "
                                         "and 102) wait in the all-reduce of their training step (inside a "
                                         "tf.function)")


def test_the_one_still_computing_is_the_odd_one_out():
    outcome = hang_outcome(reading(worker(0, "S", 0.0, STEP), worker(1, "R", 0.97, STEP)))
    assert outcome.findings[0].code == "hang.still-computing"
    assert outcome.findings[0].title.startswith("worker 1 (PID 101) still computes (CPU time moves); worker 0")


def test_the_one_waiting_elsewhere_is_named_first():
    iterator = [Frame("OwnedIterator.__next__", "tensorflow/python/data/ops/iterator_ops.py", 826)]
    collective = [Frame("CollectiveAllReduce.reduce_implementation",
                        "tensorflow/python/distribute/cross_device_ops.py", 1226)]
    outcome = hang_outcome(reading(worker(0, "S", 0.0, collective), worker(1, "S", 0.0, iterator),
                                   worker(2, "S", 0.0, collective)))
    title = outcome.findings[0].title
    assert title.startswith("worker 1 (PID 101) waits in the input pipeline (OwnedIterator.__next__")
    assert "; workers 0 and 2 (PIDs 100 and 102) wait in a collective (CollectiveAllReduce" in title
    assert "input pipeline" in outcome.findings[0].fix


def test_helper_threads_do_not_decide_what_a_process_waits_for():
    pool = ThreadStack("Thread-4 (_handle_results)", 7, False,
                       [Frame("Pool._handle_results", "multiprocessing/pool.py", 579)])
    main_thread = ThreadStack("MainThread", 100, False, STEP)
    p = ProcessReading(100, "", "", "S", 0.0, 1.0, [pool, main_thread])
    wait = process_wait(p)
    assert wait is not None and wait.kind == "graph"


# -- known hangs by their stacks ---------------------------------------------------------------

ENTRY = """schema_version = 1

[[issue]]
id = "team-generator-hang"
title = "Our generator stalls on the feature store"
symptom = "hang"
confidence = "reported"
summary = "The feature store's client blocks forever when its lease expires."
workaround = "From the write-up: renew the lease in the generator."
affects = {{ tensorflow = ">=2.0" }}

[[issue.sources]]
ref = "team wiki: feature-store-hang"
kind = "write-up"

[[issue.signatures]]
frames = {frames}
source = "team wiki: feature-store-hang"
"""


def test_a_stack_signature_names_the_known_hang_with_its_fix(tmp_path):
    (tmp_path / "team.toml").write_text(ENTRY.format(frames=json.dumps(
        ["Event.wait (threading.py…)", "generator_py_func (tensorflow/python/data/ops/from_generator_op.py…)"])))
    matrix = load_matrix(bundled_matrix_dir(), [tmp_path])
    assert not [p for p in matrix.problems if "team" in p.file]
    frames = [Frame("Condition.wait", "threading.py", 327), Frame("Event.wait", "threading.py", 629),
              Frame("generator", "train.py", 15),
              Frame("_from_generator.<locals>.generator_next_fn.<locals>.generator_py_func",
                    "tensorflow/python/data/ops/from_generator_op.py", 198)]
    p = ProcessReading(5, "", "", "S", 0.0, 1.0, [ThreadStack("", 6, False, frames)])
    known = [f for f in hang_outcome(reading(p), matrix.issues).findings if f.code.startswith("hang.known-issue")]
    assert [f.code for f in known] == ["hang.known-issue.team-generator-hang"]
    assert known[0].fix == "From the write-up: renew the lease in the generator."
    assert "PID 5, thread 6: Event.wait (threading.py:629)" in known[0].evidence
    reversed_order = ProcessReading(5, "", "", "S", 0.0, 1.0, [ThreadStack("", 6, False, frames[::-1])])
    assert not [f for f in hang_outcome(reading(reversed_order), matrix.issues).findings
                if f.code.startswith("hang.known-issue")]


@pytest.mark.parametrize("frames,message", [
    ('["no file here"]', "is not `function (file…)`"),
    ('["f (a.py)"]', "literal characters"),
    ("[]", "non-empty array of frames"),
])
def test_the_validator_checks_stack_signatures(frames, message):
    import tomllib

    raw = tomllib.loads(ENTRY.format(frames=frames))["issue"][0]
    issue, problems = parse_issue(raw, "team.toml", 0)
    assert issue is None and any(message in p.message for p in problems), problems


def test_a_signature_is_a_line_or_a_stack_not_both():
    import tomllib

    raw = tomllib.loads(ENTRY.format(frames='["Event.wait (threading.py…)", "generator (train.py…)"]'))["issue"][0]
    raw["signatures"][0]["text"] = "RuntimeError: the feature store lease expired"
    _, problems = parse_issue(raw, "team.toml", 0)
    assert any("not both" in p.message for p in problems)


# -- into the bug report, and back -------------------------------------------------------------

def schema() -> dict:
    return json.loads(resources.files("mgpu_doctor").joinpath("schemas/report.schema.json").read_text())


def test_report_hang_is_redacted_and_check_from_replays_it(capsys, tmp_path):
    pyspy_or_skip()
    secret = "--token=ghp_" + "a1B2" * 10
    with job(([sys.executable, "-c", textwrap.dedent(LOCKED), secret], None)) as (pid,):
        out_file = tmp_path / "report.md"
        code, _, _ = run_cli(capsys, "report", "--quick", "--hang", str(pid), "--interval", "0.3",
                             "-o", str(out_file))
    assert code == 0
    text = out_file.read_text()
    assert "ghp_" not in text and "--token=***" in text
    assert f"PID {pid} waits in a lock, event or queue" in text
    code, out, _ = run_cli(capsys, "check", "--from", str(out_file), "--format", "json")
    data = json.loads(out)
    jsonschema.Draft202012Validator(schema()).validate(data)
    hang = next(c for c in data["checks"] if c["name"] == "hang")
    assert hang["findings"][0]["title"].startswith(f"PID {pid} waits in a lock, event or queue")
    assert data["hang"]["processes"][0]["pid"] == pid


def test_hang_json_fits_the_schema(capsys):
    pyspy_or_skip()
    with job(python(BUSY)) as (pid,):
        code, out, _ = run_cli(capsys, "hang", str(pid), "--interval", "0.3", "--format", "json")
    data = json.loads(out)
    jsonschema.Draft202012Validator(schema()).validate(data)
    assert data["command"] == "hang" and data["hang"]["processes"][0]["state"] in ("R", "S")


# -- real TensorFlow jobs ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_stopped_mwms_worker_leaves_the_other_waiting_in_its_collective(capsys):
    pytest.importorskip("tensorflow")
    pyspy_or_skip()
    workers = [([sys.executable, str(JOBS / "mwms_job.py"), "step"], worker_env(os.environ, c, None))
               for c in local_cluster(2)]
    with job(*workers) as (first, second):
        os.kill(second, signal.SIGSTOP)
        wait_for_state(second, "T")
        time.sleep(1.0)  # the running worker reaches the step its peer never joins
        code, out, _ = run_cli(capsys, "hang", str(first), str(second), "--interval", "1")
    assert code == 1
    assert (f"worker 1 (PID {second}) is stopped (state T); worker 0 (PID {first}) waits in the all-reduce "
            "of its training step (inside a tf.function)") in " ".join(out.split())
    assert "quick_execute (tensorflow/python/eager/execute.py" in out


@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_blocked_tf_data_generator_is_an_input_pipeline_wait(capsys):
    pytest.importorskip("tensorflow")
    pyspy_or_skip()
    with job(([sys.executable, str(JOBS / "generator_blocks.py")], None)) as (pid,):
        code, out, _ = run_cli(capsys, "hang", str(pid), "-v")
    flat = " ".join(out.split())
    assert code == 1
    assert f"PID {pid} waits in the input pipeline (OwnedIterator._next_internal" in flat
    assert "innermost Condition.wait (threading.py" in flat and "generator_py_func" in flat


@pytest.mark.slow
@pytest.mark.tensorflow
def test_a_pydataset_whose_worker_processes_never_answer_is_an_input_pipeline_wait(capsys):
    # Keras 3 has no `workers=` in fit: the workers are the PyDataset's (workers=2, processes).
    pytest.importorskip("keras")
    pyspy_or_skip()
    with job(([sys.executable, str(JOBS / "pydataset_deadlock.py")], None)) as (pid,):
        time.sleep(1.0)
        code, out, _ = run_cli(capsys, "hang", str(pid), "-v")
    flat = " ".join(out.split())
    assert code == 1
    assert f"PID {pid} waits in the input pipeline (" in flat
    assert "OrderedEnqueuer.get (keras/src/trainers/data_adapters/py_dataset_adapter.py" in flat
    # Its worker processes are found without their PIDs, and each names the user's frame it is stuck in
    # (not the parent's `OrderedEnqueuer._run` its forked stack still shows).
    assert "its 2 worker processes: PIDs " in flat
    assert "wait in the input pipeline (get_index (keras/src/trainers/data_adapters/py_dataset_adapter.py" in flat
    assert "innermost Batches.__getitem__ (pydataset_deadlock.py:20)" in flat
    assert f"(a worker process of PID {pid}): sleeping (S)" in flat


WITH_WORKERS = """
    import multiprocessing, os, sys, time
    def stuck(_):
        time.sleep(10**6)
    if __name__ == "__main__":
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2) as pool:
            result = pool.map_async(stuck, range(2))
            while len(multiprocessing.active_children()) < 2:
                time.sleep(0.01)
            print("ready", flush=True)
            result.get()
"""
LAUNCHER = """
    import os, subprocess, sys
    ranks = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10**6)"],
                              env=dict(os.environ, OMPI_COMM_WORLD_RANK=str(r))) for r in range(2)]
    print("ready", flush=True)
    for r in ranks:
        r.wait()
"""


def test_worker_processes_are_found_below_the_job_and_told_apart_from_it(capsys):
    pyspy_or_skip()
    with job(python(WITH_WORKERS)) as (pid,):
        targets = discover.with_workers(discover.given([pid]), {})
        workers = sorted(p for p in targets.pids if p != pid)
        assert len(workers) == 2 and targets.serves == {w: pid for w in workers}
        assert "with the 2 Python processes they started" in targets.found_by
        code, out, _ = run_cli(capsys, "hang", str(pid), "--interval", "0.5")
    flat = " ".join(out.split())
    assert code == 1
    # The job's own process decides the verdict; the workers say where the work is stuck.
    assert f"PID {pid} waits in the input pipeline (" in flat
    assert f"its 2 worker processes: PIDs {workers[0]} and {workers[1]} wait in the input pipeline (mapstar " \
        "(multiprocessing/pool.py:" in flat
    assert "innermost stuck (<string>:" in flat
    assert f"PID {workers[0]} (a worker process of PID {pid}): sleeping (S)" in flat


def test_processes_a_launcher_started_with_their_own_rank_are_the_job_not_its_workers():
    with job(python(LAUNCHER)) as (pid,):
        targets = discover.with_workers(discover.given([pid]), {})
        ranks = [p for p in targets.pids if p != pid]
        assert len(ranks) == 2 and targets.serves == {}
        assert [procfs.role_of(p) for p in ranks] == ["rank 0", "rank 1"]


def test_a_worker_given_with_its_parent_serves_it_and_one_holding_a_gpu_does_not():
    with job(python(WITH_WORKERS)) as (pid,):
        below = discover.with_workers(discover.given([pid]), {}).pids
        workers = [p for p in below if p != pid]
        given = discover.with_workers(discover.given([pid, *workers]), {})
        assert given.serves == {w: pid for w in workers} and given.found_by == "the PIDs given"
        holding = discover.with_workers(discover.given([pid]), {workers[0]: []})
        assert holding.serves == {workers[1]: pid}


def test_a_stopped_worker_process_is_said_under_its_parent():
    def reading(pid: int, state: str, frames: list[Frame], serves: int = 0) -> ProcessReading:
        return ProcessReading(pid, "", "python train.py", state, 0.0, 1.0,
                              [ThreadStack("MainThread", pid, False, frames)], serves=serves)
    get = Frame("OrderedEnqueuer.get", "keras/src/trainers/data_adapters/py_dataset_adapter.py", 667)
    item = Frame("Batches.__getitem__", "train.py", 20)
    outcome = hang_outcome(HangReading("the PIDs given", [
        reading(10, "S", [get]), reading(11, "T", [item], serves=10), reading(12, "S", [item], serves=10)]))
    title = outcome.findings[0].title
    assert title.startswith("PID 10 waits in the input pipeline (OrderedEnqueuer.get")
    assert "its 2 worker processes: PID 11 is stopped, PID 12 waits in Python code (Batches.__getitem__" in title
    assert [line.split(":")[0] for line in outcome.findings[0].evidence if not line.startswith(" ")] == [
        "PID 10", "PID 11 (a worker process of PID 10)", "PID 12 (a worker process of PID 10)"]


def test_a_slow_numpy_job_is_no_hang(capsys):
    pytest.importorskip("numpy")
    pyspy_or_skip()
    with job(([sys.executable, str(JOBS / "busy.py")], None)) as (pid,):
        code, out, _ = run_cli(capsys, "hang", str(pid), "-v")
    assert code == 0 and f"No hang: PID {pid} computes (CPU time moves)" in out
