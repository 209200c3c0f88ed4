"""The timeout ladder with real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mgpu_doctor.process import childproc, interrupts
from mgpu_doctor.process.childproc import OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES, run_child

PY = sys.executable
CHILD_LIB = os.path.join(os.path.dirname(__file__), "..", "mgpu_doctor", "child_scripts")


def script(tmp_path, body: str) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text(
        "import sys, os, time, json\n"
        f"sys.path.insert(0, {os.path.abspath(CHILD_LIB)!r})\n"
        "import _mgpu_child\n_mgpu_child.start()\n" + textwrap.dedent(body)
    )
    return [PY, str(path)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def test_result_file_is_read(tmp_path):
    out = run_child(script(tmp_path, '_mgpu_child.write_result({"answer": 42})'), timeout_s=30)
    assert out.ok and out.result == {"answer": 42} and out.returncode == 0


def test_missing_result_falls_back_to_the_exit_code(tmp_path):
    out = run_child(script(tmp_path, 'sys.stderr.write("bad things\\n"); sys.exit(3)'), timeout_s=30)
    assert out.result is None and out.returncode == 3
    assert out.failure_summary() == "exited with status 3: bad things"


def test_abort_is_a_crash_by_signal_with_the_stack(tmp_path):
    out = run_child(script(tmp_path, "def deep():\n    os.abort()\ndeep()\n"), timeout_s=30)
    assert out.signal_name == "SIGABRT"
    assert out.failure_summary() == "crashed with SIGABRT"
    assert "in deep" in out.stderr_tail  # faulthandler's dump


def test_timeout_kills_and_collects_stacks(tmp_path):
    start = time.monotonic()
    out = run_child(script(tmp_path, "def waiting_forever():\n    time.sleep(600)\nwaiting_forever()\n"),
                    timeout_s=1.0)
    assert out.timed_out and out.returncode is None
    assert "waiting_forever" in out.stacks
    assert time.monotonic() - start < 1.0 + 5


def test_stall_is_declared_when_the_heartbeat_stops(tmp_path):
    body = """
    for step in range(3):
        _mgpu_child.heartbeat("step %d" % step)
        time.sleep(0.2)
    def stuck_in_step():
        time.sleep(600)
    stuck_in_step()
    """
    start = time.monotonic()
    out = run_child(script(tmp_path, body), timeout_s=60, stall_timeout_s=1.0)
    elapsed = time.monotonic() - start
    assert out.stalled and not out.timed_out
    assert "stuck_in_step" in out.stacks
    assert 1.5 < elapsed < 1.6 + 1.0 + 4  # progress for ~0.6 s, stall 1 s, stacks + kill


def test_steady_heartbeat_is_not_a_stall(tmp_path):
    body = """
    for step in range(12):
        _mgpu_child.heartbeat("step %d" % step)
        time.sleep(0.1)
    _mgpu_child.write_result({"steps": 12})
    """
    out = run_child(script(tmp_path, body), timeout_s=30, stall_timeout_s=0.5)
    assert out.ok and out.result == {"steps": 12}


def test_grandchild_holding_stdout_does_not_block_and_is_killed(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    body = f"""
    import subprocess
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open({str(pidfile)!r}, "w").write(str(p.pid))
    _mgpu_child.write_result({{"spawned": p.pid}})
    """
    start = time.monotonic()
    out = run_child(script(tmp_path, body), timeout_s=30)
    assert out.ok and time.monotonic() - start < 10
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the grandchild outlived its parent's run"


def test_keyboard_interrupt_kills_the_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    body = f"""
    open({str(pidfile)!r}, "w").write(str(os.getpid()))
    time.sleep(600)
    """

    def interrupt(elapsed: float) -> None:
        if pidfile.exists() and elapsed > 0.3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_child(script(tmp_path, body), timeout_s=60, on_tick=interrupt)
    pid = int(pidfile.read_text())
    assert not alive(pid)


def wait_dead(pids, within_s: float) -> list[int]:
    """The pids still alive (not zombies) after waiting up to ``within_s`` for them to go."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_the_ladder_asks_for_stacks_then_terms_then_kills_the_whole_group(tmp_path):
    """Each step is observable: remove any one of them and this test fails.

    The child answers SIGTERM by cleaning up for 0.3 s (the ladder must wait for it) and then goes
    on ignoring it; its grandchild ignores SIGTERM too: only the group SIGKILL ends them.
    """
    cleaned = tmp_path / "cleaned-up"
    pids = tmp_path / "pids"
    body = f"""
    import signal, subprocess
    grandchild = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    def on_term(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(0.3)
        open({str(cleaned)!r}, "w").write("done")
    signal.signal(signal.SIGTERM, on_term)
    open({str(pids)!r}, "w").write("%d %d" % (os.getpid(), grandchild.pid))
    def waiting_for_ever():
        while True:
            time.sleep(0.05)
    waiting_for_ever()
    """
    out = run_child(script(tmp_path, body), timeout_s=1.0)
    assert out.timed_out
    assert "waiting_for_ever" in out.stacks  # step 1: SIGUSR1, faulthandler's dump
    assert cleaned.read_text() == "done" if cleaned.exists() else False, "SIGTERM, then a wait"
    child, grandchild = (int(p) for p in pids.read_text().split())
    assert wait_dead([child, grandchild], 0.5) == []  # step 3: SIGKILL to the group


def test_a_second_interrupt_during_the_ladder_does_not_skip_the_kill(tmp_path):
    """Ctrl-C, then Ctrl-C again while the ladder waits for SIGTERM to work: SIGKILL still comes."""
    pidfile = tmp_path / "child.pid"
    body = f"""
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open({str(pidfile)!r}, "w").write(str(os.getpid()))
    time.sleep(600)
    """

    def interrupt(elapsed: float) -> None:
        if pidfile.exists():
            # The second Ctrl-C arrives 0.5 s into the ladder's SIGTERM wait (2 s).
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_child(script(tmp_path, body), timeout_s=60, on_tick=interrupt)
    assert not alive(int(pidfile.read_text()))


def test_a_stop_signal_right_after_the_child_starts_still_kills_it(tmp_path, monkeypatch):
    """SIGTERM between Popen and the child's registration for the ladder: no orphan."""
    pidfile = tmp_path / "child.pid"
    real_popen = subprocess.Popen

    def popen_then_sigterm(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        pidfile.write_text(str(proc.pid))
        os.kill(os.getpid(), signal.SIGTERM)  # delivered before Popen even returns
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen_then_sigterm)  # childproc imports it when it starts a child
    with interrupts.stop_signals_raise(), pytest.raises(interrupts.Interrupted) as caught:
        run_child(script(tmp_path, "time.sleep(600)\n"), timeout_s=60)
    assert caught.value.signum == signal.SIGTERM
    assert not alive(int(pidfile.read_text()))


def test_stacks_come_while_the_child_is_stuck_in_c_code(tmp_path):
    """faulthandler answers SIGUSR1 from C: a Python-level handler never runs during a stuck import."""
    (tmp_path / "stuck_import.py").write_text(
        "import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')  # catastrophic backtracking, in C\n")
    body = f"sys.path.insert(0, {str(tmp_path)!r})\nimport stuck_import\n"
    out = run_child(script(tmp_path, body), timeout_s=1.0)
    assert out.timed_out and "stuck_import.py" in out.stacks


def test_a_flood_of_output_costs_the_doctor_a_few_mb(tmp_path):
    """300 MB on stdout: the doctor keeps the first and last 512 KiB, in memory and on disk."""
    flood = (
        "import sys\n"
        "sys.stdout.buffer.write(b'FIRST LINE\\n')\n"
        "block = b'x' * 1048575 + b'\\n'\n"
        "for _ in range(300):\n"
        "    sys.stdout.buffer.write(block)\n"
        "sys.stdout.buffer.write(b'LAST LINE\\n')\n"
    )
    (tmp_path / "flood.py").write_text(flood)
    probe = (
        "import resource, sys\n"
        "from mgpu_doctor.process.childproc import run_child\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"out = run_child([sys.executable, {str(tmp_path / 'flood.py')!r}], timeout_s=120)\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(out.returncode, len(out.stdout), (after - before) // 1024)\n"
        "print(out.stdout[:11] == 'FIRST LINE\\n', out.stdout.rstrip().endswith('LAST LINE'))\n"
        "print('bytes of output left out' in out.stdout)\n"
    )
    done = subprocess.run([PY, "-c", probe], capture_output=True, text=True, timeout=180)
    code, kept, grown_mb = (int(x) for x in done.stdout.split("\n")[0].split())
    assert code == 0, done.stderr
    assert kept <= OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES + 200
    assert grown_mb < 16, f"the doctor grew by {grown_mb} MB"
    assert done.stdout.split("\n")[1:3] == ["True True", "True"]


@pytest.mark.parametrize("kind", ["not an executable format", "bad shebang", "no such program"])
def test_a_program_that_cannot_start_is_an_outcome_not_an_exception(tmp_path, kind):
    program = tmp_path / "program"
    if kind == "not an executable format":
        program.write_bytes(b"\x00\x01garbage")
    elif kind == "bad shebang":
        program.write_text("#!/no/such/interpreter\n")
    if program.exists():
        program.chmod(0o755)
    out = run_child([str(program)], timeout_s=10)
    assert out.start_error and out.returncode is None and not out.ok
    assert out.failure_summary().startswith("could not be started: [Errno")


def test_output_is_kept_whole_below_the_limit(tmp_path):
    out = run_child([PY, "-c", "print('a' * 1000); import sys; print('oops', file=sys.stderr)"],
                    timeout_s=30)
    assert out.stdout == "a" * 1000 + "\n" and out.stderr == "oops\n"


def test_garbage_result_file_is_reported(tmp_path):
    body = 'open(os.environ["MGPU_DOCTOR_RESULT"], "w").write("{not json")'
    out = run_child(script(tmp_path, body), timeout_s=30)
    assert out.result is None and "not valid JSON" in out.result_error
    assert "wrote no usable result" in out.failure_summary()


def test_child_gets_its_own_session(tmp_path):
    body = "_mgpu_child.write_result({'sid': os.getsid(0), 'pid': os.getpid()})"
    out = run_child(script(tmp_path, body), timeout_s=30)
    assert out.result["sid"] == out.result["pid"] != os.getsid(0)


def test_startup_allowance_before_the_first_heartbeat_then_the_stall_timeout(tmp_path):
    body = """
    time.sleep(1.0)  # a slow start (importing TensorFlow) longer than the stall timeout
    _mgpu_child.heartbeat("imported")
    def stuck_after_start():
        time.sleep(600)
    stuck_after_start()
    """
    start = time.monotonic()
    out = run_child(script(tmp_path, body), timeout_s=60, stall_timeout_s=0.5, startup_timeout_s=10)
    assert out.stalled and "stuck_after_start" in out.stacks
    assert 1.5 <= time.monotonic() - start < 1.5 + 1.0 + 4


def test_startup_allowance_also_runs_out(tmp_path):
    body = "def never_started():\n    time.sleep(600)\nnever_started()\n"
    out = run_child(script(tmp_path, body), timeout_s=60, stall_timeout_s=30, startup_timeout_s=0.5)
    assert out.stalled and "never_started" in out.stacks


def test_a_tool_that_hangs_is_killed_with_the_processes_it_started(tmp_path):
    """`ldconfig`, `ptxas --version`, the `--version` fallback go through the same runner: a timeout
    kills the tool's whole group, also the `sleep` it started (which subprocess.run leaves behind)."""
    pidfile = tmp_path / "sleep.pid"
    tool = tmp_path / "tool"
    tool.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {pidfile}\necho 'Cuda compilation tools'\nwait\n")
    tool.chmod(0o755)
    started = time.monotonic()
    out = childproc.run_tool([str(tool), "--version"], timeout_s=0.5)
    assert out.timed_out and out.stdout == "Cuda compilation tools\n"
    assert time.monotonic() - started < 5
    assert wait_dead([int(pidfile.read_text())], 1.0) == []


@pytest.fixture
def sighup_default():
    """SIGHUP at its default for the test, whatever the suite was started under (`nohup` ignores it)."""
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, before)


def test_held_sections_raise_a_stop_signal_at_their_end_not_in_their_middle(sighup_default):
    steps = []
    with interrupts.stop_signals_raise():
        with pytest.raises(interrupts.Interrupted) as caught, interrupts.held():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)  # the handler has run by now: it only noted the signal
            steps.append("finished the section")
        assert caught.value.signum == signal.SIGHUP and steps == ["finished the section"]
        assert interrupts.exit_code(caught.value) == 129 and interrupts.received() == signal.SIGHUP
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL  # what it was before, back on the way out


@pytest.mark.parametrize("before", [signal.SIG_IGN, "handler"], ids=["ignored", "own-handler"])
def test_stop_signals_keep_an_ignore_and_restore_exactly_what_was_there(before):
    """An ignored stop signal stays ignored within (and is not raised); any other is handled within
    and set back to exactly the handler found."""
    def own_handler(signum, frame):
        pass

    found = own_handler if before == "handler" else before
    saved = {sig: signal.signal(sig, found) for sig in interrupts.STOP_SIGNALS}
    try:
        with interrupts.stop_signals_raise():
            for sig in interrupts.STOP_SIGNALS:
                assert (signal.getsignal(sig) is signal.SIG_IGN) == (found is signal.SIG_IGN)
            if found is signal.SIG_IGN:
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(0.05)
                assert interrupts.received() is None
        for sig in interrupts.STOP_SIGNALS:
            assert signal.getsignal(sig) is found
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_the_pause_between_two_looks_ends_when_the_child_exits():
    """A short child (the package probe) is seen gone at once, not at the end of a poll interval."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    exited = childproc._exit_notice(proc.pid)
    try:
        if exited < 0:
            pytest.skip("no pidfd_open here (not Linux 5.3+): the loop only polls")
        start = time.monotonic()
        childproc._pause(120.0, exited)
        assert time.monotonic() - start < 60  # woke when the child exited, long before 120 s
    finally:
        if exited >= 0:
            os.close(exited)
        proc.wait()


def test_the_next_run_removes_the_folders_of_a_doctor_that_died(tmp_path):
    """A SIGKILLed doctor leaves its temporary folders (named for its pid); the next run's first folder
    removes those whose process is gone, and leaves a live doctor's and anything else alone."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(gone.stdout)
    dead = [tmp_path / f"mgpu-doctor-smoke-{dead_pid}-abc", tmp_path / f"mgpu-doctor-{dead_pid}-xyz"]
    for folder in dead:
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "runs.jsonl").write_text("{}\n")
    live = tmp_path / f"mgpu-doctor-smoke-{os.getpid()}-live"
    other = tmp_path / "mgpu-doctor-notes"
    live.mkdir()
    other.mkdir()
    # an empty cache: the quick check runs `ldconfig -p` (its first child, its first folder); with
    # the loader's listing kept it starts no child, and the folders wait for a run that does
    env = {**os.environ, "TMPDIR": str(tmp_path), "MGPU_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TF_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "mgpu_doctor", "check", "--quick"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    assert [f for f in dead if f.exists()] == []
    assert live.exists() and other.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("mgpu-doctor-") and p not in (live, other)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("sig", list(interrupts.STOP_SIGNALS), ids=lambda s: signal.Signals(s).name)
def test_a_child_script_keeps_a_stop_signal_the_doctor_was_started_with_ignored(tmp_path, sig):
    """`_mgpu_child.start()` (every child script's first line) leaves an inherited ignore alone."""
    body = """
    mask = int(next(l for l in open("/proc/self/status") if l.startswith("SigIgn:")).split()[1], 16)
    _mgpu_child.write_result({"ignored": mask})
    """
    before = signal.signal(sig, signal.SIG_IGN)
    try:
        with interrupts.stop_signals_raise():
            out = run_child(script(tmp_path, body), timeout_s=60)
    finally:
        signal.signal(sig, before)
    assert out.result is not None, out.stderr_tail
    assert out.result["ignored"] >> (sig - 1) & 1 == 1


ESCAPING = """
import subprocess
pids = []
# a child in a session of its own: the group kill does not reach it
pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True).pid)
# a daemon by double fork: the middle process exits at once, the grandchild is re-parented
reader, writer = os.pipe()
if os.fork() == 0:
    os.setsid()
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    os.write(writer, str(pid).encode())
    os._exit(0)
pids.append(int(os.read(reader, 32)))
open(PIDFILE, "w").write(" ".join(map(str, pids)))
"""


@pytest.mark.parametrize("ending", ["returns", "times out"])
def test_processes_in_sessions_of_their_own_end_with_the_run(tmp_path, ending):
    # Issue 40: a model function that starts a child in its own session or double-forks left its
    # processes running after the doctor.
    pidfile = tmp_path / "escaped.pid"
    tail = "_mgpu_child.write_result({})\n" if ending == "returns" else "time.sleep(600)\n"
    out = run_child(script(tmp_path, f"PIDFILE = {str(pidfile)!r}\n" + textwrap.dedent(ESCAPING) + tail),
                    timeout_s=30 if ending == "returns" else 3)
    assert out.ok if ending == "returns" else out.timed_out
    escaped = [int(p) for p in pidfile.read_text().split()]
    assert len(escaped) == 2
    assert not [pid for pid in escaped if alive(pid)], "a process of the run outlived it"


def test_plain_tools_skip_the_search_and_nothing_else_is_touched(tmp_path):
    bystander = subprocess.Popen([PY, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        out = childproc.run_tool(["true"], timeout_s=10)
        run_child(script(tmp_path, "_mgpu_child.write_result({})\n"), timeout_s=30)
        assert out.returncode == 0 and alive(bystander.pid)  # not of the run: left alone
    finally:
        bystander.kill()
        bystander.wait()
