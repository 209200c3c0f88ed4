"""The smoke workers' supervision of their runs, one forked child each (Python 3.6+, standard library).

Shared by smoke_worker.py (TensorFlow) and smoke_worker_jax.py (Keras 3 on JAX): the worker has
imported its framework without starting its runtime, and ``serve`` forks one child per spec, in
which ``body(spec, result, out_dir, attempt)`` fills the run's result. A run killed by a signal is
tried once more before it counts as a crash; each finished run is one JSON line of
OUT_DIR/runs.jsonl; SIGUSR1 from the parent (its stall watchdog) goes on to the run in flight,
whose stacks are the ones that matter.

Test-only fault injection: MGPU_DOCTOR_SMOKE_FAULT="LAYER:FAULT[:DEVICES][,...]" (``parse_fault``);
each worker says which faults it knows.
"""

import json
import os
import signal
import sys
import threading
import time

import _mgpu_child

FAULT_ENV = "MGPU_DOCTOR_SMOKE_FAULT"
LEAK_BYTES = 48 * 1024 * 1024  # the "leak" fault: kept each epoch
leaked = []
attempt_now = [1]  # the attempt of the run in this process: the "killed" fault strikes the first only
_current_child = [0]


def parse_fault(layer, devices):
    """The fault injected into this run, from "LAYER:FAULT[:DEVICES]" items, comma-separated."""
    for item in os.environ.get(FAULT_ENV, "").split(","):
        parts = item.strip().split(":")
        if len(parts) < 2 or parts[0] != layer:
            continue
        if len(parts) > 2 and parts[2] and int(parts[2]) != devices:
            continue
        return parts[1]
    return ""


def strike(fault, batch):
    """The step faults, at the second step of a run: hang (forever), abort, killed (SIGKILL, as
    from outside, on the first attempt only), raise."""
    if batch != 1:
        return
    if fault == "hang":
        threading.Event().wait()  # injected: a step that never finishes
    if fault == "abort":
        os.abort()
    if fault == "killed" and attempt_now[0] == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # injected: killed from outside, once
    if fault == "raise":
        raise RuntimeError("injected fault: raise in a training step")


def rss_mb():
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1048576.0
    except (IOError, OSError, ValueError, IndexError):
        return None


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def serve(specs, out_dir, body):
    """Every spec in its forked child, in order; the worker's SIGUSR1 goes on to the run in flight."""
    import faulthandler
    faulthandler.unregister(signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, _forward_usr1)
    _mgpu_child.heartbeat("imported")
    lines = os.path.join(out_dir, "runs.jsonl")
    for spec in specs:
        _mgpu_child.heartbeat("start %d" % spec["index"])
        result = supervise_fork(body, spec, out_dir)
        with open(lines, "a") as fh:
            fh.write(json.dumps(result) + "\n")
        _mgpu_child.heartbeat("done %d" % spec["index"])


def _forward_usr1(signum, frame):
    """The parent asks for stacks: those of the run in flight, else the worker's own."""
    pid = _current_child[0]
    if pid:
        try:
            os.kill(pid, signal.SIGUSR1)
            return
        except OSError:
            pass
    import faulthandler
    faulthandler.dump_traceback(all_threads=True)


def supervise_fork(body, spec, out_dir):
    """Run one spec; a run killed by a signal is tried once more before it counts as a crash.

    A signal can come from outside (a busy shared machine, the kernel's OOM killer): one death
    by a signal says little about the layer, two in a row do. Each death records the signal and
    how many OOM kills the kernel counted meanwhile (the parent tells out-of-memory apart).
    """
    deaths = []
    for attempt in (1, 2):
        before = _mgpu_child.oom_kill_count()
        result, signum = _fork_once(body, spec, out_dir, attempt)
        if signum is None:
            break
        after = _mgpu_child.oom_kill_count()
        deaths.append({"signal": signal_name(signum),
                       "oom_kills": (after - before) if None not in (before, after) else None})
        if attempt == 1:
            _mgpu_child.heartbeat("retry %d" % spec["index"])
    result["signal_deaths"] = deaths
    return result


def _fork_once(body, spec, out_dir, attempt):
    """One attempt of a run in a forked child: its result, or how it died."""
    sys.stdout.flush()
    sys.stderr.flush()
    offset = _stderr_offset()
    worker = os.getpid()
    pid = os.fork()
    if pid == 0:
        _run_one(body, spec, out_dir, worker, attempt)
    _current_child[0] = pid
    _, status = os.waitpid(pid, 0)
    _current_child[0] = 0
    path = os.path.join(out_dir, "run-%d.json" % spec["index"])
    try:
        with open(path) as fh:
            result = json.load(fh)
        os.remove(path)
        return result, None
    except (IOError, OSError, ValueError):
        pass
    result = {"index": spec["index"], "status": "crash", "stderr_tail": _stderr_from(offset)}
    if os.WIFSIGNALED(status):
        result["signal"] = signal_name(os.WTERMSIG(status))
        return result, os.WTERMSIG(status)
    result.update(status="error", error_type="ExitStatus",
                  error_message="the run exited with status %s without a result" % (
                      os.WEXITSTATUS(status) if os.WIFEXITED(status) else status))
    return result, None


def _run_one(body, spec, out_dir, worker_pid, attempt):
    """In the forked child: run ``body``, write run-N.json, and leave without running atexit."""
    _mgpu_child.die_with_parent(signal.SIGKILL, parent=worker_pid)  # not inherited through fork
    import faulthandler
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    attempt_now[0] = attempt
    code = 0
    result = {"index": spec["index"], "status": "error"}
    start = time.time()
    try:
        body(spec, result, out_dir, attempt)
    except BaseException as exc:
        info = _mgpu_child.describe_exception(exc)
        result.update(status="error", error_type=info["type"], error_message=info["message"][-2000:],
                      traceback=info["traceback"][-4000:])
    result["duration_s"] = time.time() - start
    try:
        _mgpu_child.write_json_file(os.path.join(out_dir, "run-%d.json" % spec["index"]), result)
    except BaseException:
        code = 3
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _stderr_from(offset):
    try:
        with open("/proc/self/fd/2", "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(offset, end - 4000))
            return fh.read(4000).decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def _stderr_offset():
    try:
        return os.lseek(2, 0, os.SEEK_CUR)
    except OSError:
        return 0
