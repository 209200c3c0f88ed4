"""Stopping the doctor from outside, through the real CLI in a subprocess: SIGTERM and SIGHUP
(schedulers, CI, a closed terminal) as Ctrl-C, and SIGKILL. After each, no process of the run
may remain: looked up by the children's process group, by the run's temporary directory in
/proc/*/cmdline, and by a mark in their environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from mgpu_doctor.smoke.plan import SmokeOptions, plan_runs

PY = sys.executable
CHILD_SCRIPTS = Path(__file__).resolve().parent.parent / "mgpu_doctor" / "child_scripts"


class Run:
    """One doctor started as a user's shell would, with its temp files in its own directory."""

    def __init__(self, tmp_path: Path, *args: str, **env: str) -> None:
        self.mark = uuid.uuid4().hex
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.env = {**os.environ, "MGPU_TEST_MARK": self.mark, "TMPDIR": str(self.tmp),
                    "TF_CPP_MIN_LOG_LEVEL": "2", **env}
        self.env.pop("TF_CONFIG", None)
        self.proc = subprocess.Popen([PY, "-m", "mgpu_doctor", *args], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=self.env, start_new_session=True)
        self.groups: set[int] = set()

    def children(self) -> list[tuple[int, int, str]]:
        """(pid, process group, command line) of the live processes of this run but the doctor."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.proc.pid:
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                if fields[0] == "Z":
                    continue
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    environ = fh.read()
            except OSError:
                continue
            if str(self.tmp) in cmdline or f"MGPU_TEST_MARK={self.mark}".encode() in environ \
                    or int(fields[2]) in self.groups:
                found.append((int(entry), int(fields[2]), cmdline))
        return found

    def wait_for(self, condition, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "timed out waiting"
            time.sleep(0.1)
        self.groups |= {group for _, group, _ in self.children()}

    def stop(self, sig: int) -> tuple[str, str]:
        self.groups |= {group for _, group, _ in self.children()}
        os.kill(self.proc.pid, sig)
        return self.proc.communicate(timeout=60)

    def leftovers(self, within_s: float = 5.0) -> list[tuple[int, int, str]]:
        """What of the run is still alive after ``within_s`` seconds (by group, temp dir, mark)."""
        deadline = time.monotonic() + within_s
        while self.children() and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.children()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
@pytest.mark.tensorflow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_stop_signal_mid_smoke_kills_the_trainings_and_keeps_what_finished(tmp_path, sig):
    results = tmp_path / "runs.jsonl"
    run = Run(tmp_path, "smoke", "--layers", "dense", "--results", str(results), "--stall-timeout", "300",
              MGPU_DOCTOR_SMOKE_FAULT="dense:hang:2")
    run.wait_for(lambda: lines(results))
    time.sleep(1.0)  # the 2-device run is now blocked in its injected hang
    workers = [cmd for _, _, cmd in run.children() if "smoke_worker.py" in cmd]
    assert workers and all(str(run.tmp) in cmd for cmd in workers)  # the temp dir names the run
    out, err = run.stop(sig)
    assert run.proc.returncode == 128 + sig, err
    assert f"interrupted by {signal.Signals(sig).name}" in err
    assert "Smoke training: dense on 1 simulated CPU device(s), even batches" in out  # what finished
    planned = len(plan_runs(SmokeOptions(layers=("dense",)), 0))
    assert f"Interrupted: 1 of {planned} smoke runs finished." in out
    assert len(lines(results)) == 1
    assert run.leftovers() == []


@pytest.mark.slow
@pytest.mark.tensorflow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_stop_signal_mid_multiworker_smoke_kills_every_worker_and_keeps_what_finished(tmp_path, sig):
    results = tmp_path / "runs.jsonl"
    run = Run(tmp_path, "smoke", "--workers", "2", "--keras", "both", "--results", str(results),
              "--format", "json")
    run.wait_for(lambda: lines(results))  # the first run (TensorFlow's default Keras) is done
    run.wait_for(lambda: sum("multiworker_worker.py" in cmd for _, _, cmd in run.children()) >= 2)
    out, err = run.stop(sig)
    assert run.proc.returncode == 128 + sig, err
    report = json.loads(out)
    assert len(report["multiworker_runs"]) == 1 and len(lines(results)) == 1
    assert "Interrupted: 1 of 2 multi-worker runs finished." in report["notes"]
    assert run.leftovers() == []


@pytest.mark.slow
@pytest.mark.tensorflow
def test_sigkill_of_the_doctor_mid_smoke_leaves_no_process_of_the_run(tmp_path):
    results = tmp_path / "runs.jsonl"
    run = Run(tmp_path, "smoke", "--layers", "dense", "--results", str(results), "--stall-timeout", "300",
              MGPU_DOCTOR_SMOKE_FAULT="dense:hang:2")
    run.wait_for(lambda: lines(results))
    time.sleep(1.0)
    before = run.children()
    # the worker, its lifeline watcher and the forked run that hangs
    assert sum("smoke_worker.py" in cmd for _, _, cmd in before) >= 3, before
    run.stop(signal.SIGKILL)
    assert run.proc.returncode == -signal.SIGKILL
    assert run.leftovers(within_s=5.0) == []
    assert len(lines(results)) == 1  # written the moment it finished: still there


PARENT = """
import subprocess, sys, time
sys.path.insert(0, {repo!r})
from mgpu_doctor.process.childproc import run_child
if {lifeline!r}:
    run_child([sys.executable, {child!r}], timeout_s=600)
else:  # a plain child: only PR_SET_PDEATHSIG can take it down with us
    subprocess.Popen([sys.executable, {child!r}], start_new_session=True).wait()
"""
CHILD = """
import os, subprocess, sys, time
sys.path.insert(0, {scripts!r})
import _mgpu_child
_mgpu_child.start()
grandchild = subprocess.Popen(["sleep", "600"])
open({pids!r} + ".tmp", "w").write("%d %d" % (os.getpid(), grandchild.pid))
os.replace({pids!r} + ".tmp", {pids!r})
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("lifeline", [True, False], ids=["lifeline-watcher", "pdeathsig-only"])
def test_children_die_within_2_s_of_a_sigkilled_doctor(tmp_path, lifeline):
    """The child's PR_SET_PDEATHSIG takes it down; the lifeline watcher takes down its whole group."""
    pids = tmp_path / "pids"
    child = tmp_path / "child.py"
    child.write_text(CHILD.format(scripts=str(CHILD_SCRIPTS), pids=str(pids)))
    parent = subprocess.Popen([PY, "-c", PARENT.format(repo=str(CHILD_SCRIPTS.parent.parent),
                                                       lifeline=lifeline, child=str(child))],
                              start_new_session=True)
    deadline = time.monotonic() + 30
    while not pids.exists():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    child_pid, grandchild_pid = (int(p) for p in pids.read_text().split())
    parent.kill()
    parent.wait()
    watched = [child_pid, grandchild_pid] if lifeline else [child_pid]
    deadline = time.monotonic() + 2.0
    while any(alive(p) for p in watched) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert [p for p in watched if alive(p)] == []
    finally:
        for pid in (child_pid, grandchild_pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def write(path: Path, text: str, mode: int = 0o755) -> str:
    path.write_text(textwrap.dedent(text))
    path.chmod(mode)
    return str(path)


def test_a_python_that_never_answers_is_an_error_and_is_killed_with_its_children(tmp_path):
    """`--python` at a program that never answers: bounded by MGPU_DOCTOR_PYTHON_TIMEOUT, an error
    finding, and the `sleep` it started is gone too."""
    run = Run(tmp_path, "check", "--quick", "--format", "json", "--python",
              write(tmp_path / "sleeper", "#!/bin/sh\nsleep 600\n"), MGPU_DOCTOR_PYTHON_TIMEOUT="1")
    started = time.monotonic()
    out, err = run.proc.communicate(timeout=60)
    assert run.proc.returncode == 1, err
    assert time.monotonic() - started < 15
    [finding] = next(c for c in json.loads(out)["checks"] if c["name"] == "interpreter")["findings"]
    assert finding["code"] == "interpreter.no-answer" and finding["severity"] == "error"
    assert "did not answer within 1 s" in finding["title"]
    assert any(line.startswith("ran: ") and "sleeper" in line for line in finding["evidence"])
    assert run.leftovers(within_s=1.0) == []
