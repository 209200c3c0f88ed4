"""Run a child process that may hang, crash, flood its output or leave grandchildren behind.

This is the one way the doctor starts a process (probes, smoke workers, ``ldconfig``,
``nvcc --version``). The child runs in its own session (so its whole process group can be
killed), with stdin closed and stdout/stderr going to files, never pipes: a grandchild that
inherits a pipe can keep the parent waiting forever. Of each stream at most
``OUTPUT_HEAD_BYTES`` + ``OUTPUT_TAIL_BYTES`` are read (and, where the file system can punch
holes, kept on disk): a child that prints 300 MB costs the doctor a few MB. The child reports
through a JSON result file; when that file is missing, the exit code or signal says what happened.

On a timeout or a stall (no heartbeat for ``stall_timeout_s``) the parent asks for Python
stacks with SIGUSR1 (the child registers ``faulthandler`` for it), then SIGTERMs and finally
SIGKILLs the group. Ctrl-C, SIGTERM or SIGHUP in the parent (see :mod:`mgpu_doctor.process.interrupts`)
kill the group too, then propagate; a second one during the ladder cannot skip its SIGKILL.

Children never outlive the doctor: each inherits the read end of a pipe whose write end only the
doctor holds (``MGPU_DOCTOR_LIFELINE_FD``). The child scripts (``_mgpu_child.start``) set
``PR_SET_PDEATHSIG`` and fork a watcher that kills their process group when that pipe reaches
end-of-file, i.e. when the doctor is gone, also after a SIGKILL.

``subprocess`` and ``tempfile`` are imported where a child is started or its folder made, not with
this module: a quick check whose loader listing is kept starts no child (2.4 ms of its run).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from mgpu_doctor.process import interrupts
from mgpu_doctor.process.reaper import become_subreaper, end_marked
from mgpu_doctor.record import record

if TYPE_CHECKING:
    import subprocess

STACKS_WAIT_S = 1.0
TERM_WAIT_S = 2.0
KILL_WAIT_S = 2.0
TAIL_CHARS = 4000
OUTPUT_HEAD_BYTES = 512 * 1024  # kept of the start of a child's stdout, and of its stderr
OUTPUT_TAIL_BYTES = 512 * 1024  # kept of the end of each
FOLD_AT_BYTES = 4 * 1024 * 1024  # an output file with this much unread middle: free its disk space
STACKS_MAX_BYTES = 256 * 1024
LIFELINE_ENV = "MGPU_DOCTOR_LIFELINE_FD"


@record
class ChildOutcome:
    """What became of one child run."""

    returncode: int | None  # None: had to be killed after a timeout or stall, or never started
    result: Any  # the parsed result file, or None when missing or unreadable
    result_error: str  # why the result file could not be used ("" when it was)
    timed_out: bool
    stalled: bool
    duration_s: float
    stdout: str  # at most OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES of it, a marker where the middle was
    stderr: str
    stacks: str  # faulthandler's dump taken when a timeout or stall was declared
    start_error: str = ""  # why the program could not be started at all ("" when it was)
    last_step: str = ""  # the last line of the heartbeat file: the step the child was in at the end

    @property
    def stdout_tail(self) -> str:
        return self.stdout[-TAIL_CHARS:]

    @property
    def stderr_tail(self) -> str:
        return self.stderr[-TAIL_CHARS:]

    @property
    def signal_name(self) -> str:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.result is not None

    def failure_summary(self) -> str:
        """One line saying how the child ended when it did not end well."""
        if self.start_error:
            return f"could not be started: {self.start_error}"
        if self.timed_out:
            return f"did not finish within {self.duration_s:.0f} s and was killed"
        if self.stalled:
            return f"stopped making progress and was killed after {self.duration_s:.0f} s"
        if self.signal_name:
            return f"crashed with {self.signal_name}"
        if self.returncode not in (0, None):
            last = _last_line(self.stderr_tail)
            return f"exited with status {self.returncode}" + (f": {last}" if last else "")
        if self.result is None:
            return f"wrote no usable result ({self.result_error})"
        return "finished"


ProgressCallback = Callable[[float], None]


def run_child(
    argv: Sequence[str],
    *,
    timeout_s: float,
    stall_timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    on_tick: ProgressCallback | None = None,
    startup_timeout_s: float | None = None,
    keep_bytes: int = OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES,
    end_descendants: bool = True,
) -> ChildOutcome:
    """Run ``argv`` with ``MGPU_DOCTOR_RESULT`` and ``MGPU_DOCTOR_HEARTBEAT`` set to files.

    The child writes its JSON result to ``$MGPU_DOCTOR_RESULT`` and touches (or appends to)
    ``$MGPU_DOCTOR_HEARTBEAT`` whenever it makes progress; ``stall_timeout_s`` without a
    change of that file counts as a hang. Until the first heartbeat, ``startup_timeout_s``
    (when given) applies instead, so a slow start (importing TensorFlow) is not a stall.
    With ``workdir`` the files stay there after the run (the caller owns the folder).
    ``keep_bytes``: how much of each output stream is kept (half head, half tail).
    A program that cannot be started at all is an outcome with ``start_error``, not an exception.
    ``end_descendants``: when the run ends, every process it started ends too, in any session
    (:mod:`mgpu_doctor.process.reaper`); plain tools that start none skip the search.
    """
    if end_descendants:
        become_subreaper()
    own_dir = workdir is None
    tmp = run_folder() if own_dir else workdir
    assert tmp is not None
    result_path = tmp / "result.json"
    heartbeat_path = tmp / "heartbeat"
    child_env = dict(os.environ if env is None else env)
    child_env["MGPU_DOCTOR_RESULT"] = str(result_path)
    child_env["MGPU_DOCTOR_HEARTBEAT"] = str(heartbeat_path)
    child_env.setdefault("PYTHONFAULTHANDLER", "1")
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    lifeline = _lifeline_read_end()
    child_env[LIFELINE_ENV] = str(lifeline)
    try:
        with _Capture(tmp / "stdout.txt", keep_bytes) as out, _Capture(tmp / "stderr.txt", keep_bytes) as err:
            return _supervise(
                argv, child_env, out, err, result_path, heartbeat_path,
                timeout_s, stall_timeout_s, on_tick, startup_timeout_s, lifeline,
            )
    finally:
        if end_descendants:  # the heartbeat file's name is unique to this run, and every descendant has it
            end_marked("MGPU_DOCTOR_HEARTBEAT", str(heartbeat_path))
        if own_dir:
            _remove_tree(tmp)


def run_tool(argv: Sequence[str], timeout_s: float, keep_bytes: int = OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES,
             env: Mapping[str, str] | None = None) -> ChildOutcome:
    """A plain program (``ldconfig -p``, ``ptxas --version``, ``lspci``) under the same supervision.

    Its output is in ``stdout``; ``returncode`` 0 and no ``start_error`` mean it ran.
    """
    return run_child(argv, timeout_s=timeout_s, keep_bytes=keep_bytes, env=env, end_descendants=False)


_lifeline: list[int] = []


def _lifeline_read_end() -> int:
    """The read end every child inherits; only this process holds the write end, so the
    children see end-of-file exactly when the doctor is gone (however it ended)."""
    if not _lifeline:
        read_end, write_end = os.pipe()  # both close-on-exec; pass_fds hands the read end on
        _lifeline.extend((read_end, write_end))
    return _lifeline[0]


def _supervise(
    argv: Sequence[str],
    env: dict[str, str],
    out: _Capture,
    err: _Capture,
    result_path: Path,
    heartbeat_path: Path,
    timeout_s: float,
    stall_timeout_s: float | None,
    on_tick: ProgressCallback | None,
    startup_timeout_s: float | None,
    lifeline: int,
) -> ChildOutcome:
    import subprocess

    start = time.monotonic()
    proc: subprocess.Popen[bytes] | None = None
    exited = -1
    timed_out = stalled = False
    stacks = ""
    try:
        with interrupts.held():  # a stop signal now is raised once the child is known to the ladder
            try:
                proc = subprocess.Popen(
                    list(argv), stdin=subprocess.DEVNULL, stdout=out.file, stderr=err.file, env=env,
                    start_new_session=True, close_fds=True, pass_fds=(lifeline,),
                )
            except (OSError, ValueError) as exc:
                return _not_started(exc, out, err, time.monotonic() - start)
        exited = _exit_notice(proc.pid)
        last_beat = _beat_marker(heartbeat_path)
        last_progress = start
        started = startup_timeout_s is None
        poll = 0.002
        while True:
            if proc.poll() is not None:
                break
            now = time.monotonic()
            beat = _beat_marker(heartbeat_path)
            if beat != last_beat:
                last_beat, last_progress, started = beat, now, True
            stall_limit = stall_timeout_s if started else startup_timeout_s
            if now - start > timeout_s:
                timed_out = True
            elif stall_limit is not None and now - last_progress > stall_limit:
                stalled = True
            if timed_out or stalled:
                stacks = _collect_stacks(proc, err.path)
                _kill_group(proc)
                break
            if out.fold() or err.fold():
                poll = 0.002  # a flood of output: look again soon, so the files stay small
            if on_tick is not None:
                on_tick(now - start)
            _pause(poll, exited)
            poll = min(poll * 1.5, 0.05)
    except BaseException:
        if proc is not None:
            _kill_group(proc)
        raise
    finally:
        if exited >= 0:
            os.close(exited)
    duration = time.monotonic() - start
    _kill_group(proc)  # grandchildren left in the group after a normal exit go too
    result, result_error = _read_result(result_path)
    return ChildOutcome(
        returncode=None if (timed_out or stalled) else proc.returncode,
        result=result,
        result_error=result_error,
        timed_out=timed_out,
        stalled=stalled,
        duration_s=duration,
        stdout=out.text(),
        stderr=err.text(),
        stacks=stacks,
        last_step=_last_step(heartbeat_path),
    )


def _last_step(heartbeat_path: Path) -> str:
    try:
        with heartbeat_path.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 400))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _exit_notice(pid: int) -> int:
    """A descriptor that becomes readable when the child exits (Linux 5.3+), or -1."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or a seccomp filter: poll only
        return -1


def _pause(seconds: float, exited: int) -> None:
    """Sleep between two looks at the child, but wake as soon as it exits: a short child (the
    package probe, `ldconfig -p`) would otherwise wait out the poll interval."""
    if exited >= 0:
        watch = select.poll()  # not select.select: no limit on the descriptor's number
        watch.register(exited, select.POLLIN)
        watch.poll(seconds * 1000)
    else:
        time.sleep(seconds)


def _not_started(exc: BaseException, out: _Capture, err: _Capture, duration: float) -> ChildOutcome:
    if isinstance(exc, OSError):
        why = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
        if exc.errno is not None:
            why = f"[Errno {exc.errno}] {why}"
    else:
        why = str(exc)
    return ChildOutcome(returncode=None, result=None, result_error="not started", timed_out=False,
                        stalled=False, duration_s=duration, stdout=out.text(), stderr=err.text(),
                        stacks="", start_error=why)


class _Capture:
    """One output stream of a child, in a file of which at most ``keep`` bytes are ever read.

    The doctor reads the first and the last ``keep / 2`` bytes only. When the file grows past
    ``FOLD_AT_BYTES`` its middle is punched out (``fallocate(PUNCH_HOLE)``: the disk space is
    freed, the child's offsets and the file's size stay as they were, nothing races the writer);
    where the file system cannot punch holes the file just stays as large as the output was.
    """

    def __init__(self, path: Path, keep: int) -> None:
        self.path = path
        self.head_bytes = keep // 2
        self.tail_bytes = keep - self.head_bytes
        self.fold_at = max(FOLD_AT_BYTES, 2 * keep)
        self.file: BinaryIO = path.open("wb")
        self.punched_to = 0
        self.can_punch = True

    def __enter__(self) -> _Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()

    def fold(self) -> bool:
        """Free the disk space of a large file's middle; True when it did."""
        if not self.can_punch:
            return False
        try:
            size = os.fstat(self.file.fileno()).st_size
        except OSError:
            return False
        if size - max(self.punched_to, self.head_bytes) <= self.fold_at:
            return False
        start = -(-max(self.punched_to, self.head_bytes) // _BLOCK) * _BLOCK
        end = (size - self.tail_bytes) // _BLOCK * _BLOCK
        if end <= start:
            return False
        self.can_punch = _punch_hole(self.file.fileno(), start, end - start)
        if self.can_punch:
            self.punched_to = end
        return self.can_punch

    def text(self) -> str:
        try:
            with self.path.open("rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size <= self.head_bytes + self.tail_bytes:
                    return _decode(fh.read(self.head_bytes + self.tail_bytes))
                head = fh.read(self.head_bytes)
                fh.seek(size - self.tail_bytes)
                tail = fh.read(self.tail_bytes)
        except OSError:
            return ""
        dropped = size - len(head) - len(tail)
        return (_decode(head) + f"\n[... {dropped} bytes of output left out: mgpu-doctor keeps the first "
                f"{len(head)} and the last {len(tail)} ...]\n" + _decode(tail))


_BLOCK = 4096
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


def _punch_hole(fd: int, offset: int, length: int) -> bool:
    """Free the disk blocks of a byte range, keeping the file's size (Linux; False elsewhere)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
        fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        return bool(fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length) == 0)
    except (OSError, AttributeError):
        return False


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _beat_marker(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


def _collect_stacks(proc: subprocess.Popen[bytes], err_path: Path) -> str:
    """Ask the child for all threads' Python stacks (faulthandler on SIGUSR1).

    Waits until the dump has stopped growing, at most ``STACKS_WAIT_S``.
    """
    offset = err_path.stat().st_size if err_path.exists() else 0
    try:
        os.kill(proc.pid, signal.SIGUSR1)
    except (ProcessLookupError, PermissionError):
        return ""
    deadline = time.monotonic() + STACKS_WAIT_S
    seen = -1
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        size = len(_read_from(err_path, offset))
        if size and size == seen:
            break
        seen = size
    return _read_from(err_path, offset)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM then SIGKILL the child's whole process group, with short bounded waits.

    A stop signal during the ladder (a second Ctrl-C) is raised after it: the SIGKILL step runs.
    """
    with interrupts.held():
        _ladder(proc)


def _ladder(proc: subprocess.Popen[bytes]) -> None:
    import subprocess

    pgid = proc.pid  # start_new_session: the child leads its own group, also once it is reaped
    stopped: BaseException | None = None
    if proc.poll() is None:
        try:
            _signal_group(pgid, signal.SIGTERM)
            proc.wait(TERM_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt as exc:  # not held (a foreign SIGINT handler): finish the ladder first
            stopped = exc
    while True:
        try:
            _signal_group(pgid, signal.SIGKILL)
            break
        except KeyboardInterrupt as exc:
            stopped = stopped or exc
    try:
        proc.wait(KILL_WAIT_S)
        _wait_group_gone(pgid, KILL_WAIT_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process in D state
        pass
    except KeyboardInterrupt as exc:
        stopped = stopped or exc
    if stopped is not None:
        raise stopped


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Until no live process is left in the group (SIGKILL is delivered, not awaited): the rest
    of the group (a watcher, a forked run) is not ours to wait for, so look in /proc."""
    deadline = time.monotonic() + timeout_s
    while _live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _live_members(pgid: int) -> bool:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


MAX_RESULT_BYTES = 64 * 1024 * 1024


def _read_result(path: Path) -> tuple[Any, str]:
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            return None, f"result file larger than {MAX_RESULT_BYTES // 2**20} MiB"
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, "no result file"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"result file unreadable: {exc}"
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as exc:
        return None, f"result file is not valid JSON: {exc.msg}"
    except RecursionError:
        return None, "result file is nested too deeply"


def _read_from(path: Path, offset: int, limit: int = STACKS_MAX_BYTES) -> str:
    """At most ``limit`` bytes written after ``offset`` (the first ones: a stack dump's start)."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


_RUN_FOLDER = re.compile(r"^mgpu-doctor-(?:[a-z]+-)?(\d+)-")
_swept = False


def run_folder(kind: str = "") -> Path:
    """A new temporary folder for a child's files, named for this process (``mgpu-doctor-smoke-PID-…``).

    A doctor killed with SIGKILL cannot remove its folders (its children die with it); the first
    folder made by a later run removes every such folder, of this user, whose process is gone.
    """
    import tempfile

    global _swept
    if not _swept:
        _swept = True
        _sweep_dead_runs(Path(tempfile.gettempdir()))
    prefix = f"mgpu-doctor-{kind}-" if kind else "mgpu-doctor-"
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def _sweep_dead_runs(folder: Path) -> None:
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _RUN_FOLDER.match(name)
        if match is None or int(match.group(1)) == os.getpid() or _process_alive(int(match.group(1))):
            continue
        path = folder / name
        try:
            if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)  # never follows a link out of the folder


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or a number no process has: keep, to be safe)
    return True


def _remove_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), reverse=True):
        try:
            child.rmdir() if child.is_dir() else child.unlink()
        except OSError:
            pass
    try:
        path.rmdir()
    except OSError:
        pass
