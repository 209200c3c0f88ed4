"""Shared helpers of mgpu-doctor's child scripts (Python 3.6+, standard library only)."""

import atexit
import errno
import faulthandler
import json
import os
import signal
import sys
import traceback


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
LIFELINE_ENV = "MGPU_DOCTOR_LIFELINE_FD"
_watcher = {"owner": 0, "pid": 0}


def start():
    """The first call of every child script: die with the doctor, and be able to show stacks.

    - the kernel SIGKILLs this process when the doctor dies (PR_SET_PDEATHSIG);
    - a watcher process kills this whole process group (forked trainings, anything the child
      started) when the doctor's lifeline pipe reaches end-of-file, i.e. when the doctor is gone;
    - faulthandler dumps every thread's stack on a crash and on SIGUSR1, from C level, so the
      parent gets a stack even while the main thread is stuck in C code (`import tensorflow`).
    """
    die_with_parent()
    start_lifeline_watch()
    install_stack_dumps()


def die_with_parent(sig=signal.SIGKILL, parent=None):
    """Ask the kernel to send ``sig`` when the parent dies; exit now if it already has (Linux only)."""
    if parent is None:
        parent = os.getppid()
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError, ValueError):
        return False
    if os.getppid() != parent:  # the parent died before the request: nobody would signal us
        os.kill(os.getpid(), sig)
    return done


def start_lifeline_watch():
    """Fork the watcher that kills this process group once the doctor's lifeline pipe ends."""
    fd = os.environ.pop(LIFELINE_ENV, "")
    if not fd.isdigit():
        return 0
    fd = int(fd)
    try:
        os.fstat(fd)
    except OSError:
        return 0
    pid = os.fork()
    if pid == 0:
        _watch_lifeline(fd)
    _watcher.update(owner=os.getpid(), pid=pid)
    atexit.register(_stop_watcher)
    return pid


def _watch_lifeline(fd):
    """In the watcher process: block until end-of-file, then kill the whole group. Never returns."""
    try:
        # Only SIGKILL (the ladder's last step, or its own) ends the watcher: it outlives a SIGTERM
        # to the group, so a doctor killed in the middle of the ladder still leaves nothing behind.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_IGN)
        while True:
            try:
                if not os.read(fd, 64):
                    break
            except OSError as exc:
                if exc.errno != errno.EINTR:
                    break
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def _stop_watcher():
    """At a normal exit: the watcher has nothing left to guard."""
    if _watcher["pid"] and _watcher["owner"] == os.getpid():
        try:
            os.kill(_watcher["pid"], signal.SIGKILL)
            os.waitpid(_watcher["pid"], 0)
        except OSError:
            pass


def install_stack_dumps():
    """Dump every thread's Python stack on a crash, and on SIGUSR1 when the parent asks."""
    faulthandler.enable(all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)


def write_result(obj):
    """Write the JSON result atomically, so the parent never reads half a file."""
    path = os.environ.get("MGPU_DOCTOR_RESULT")
    if not path:
        json.dump(obj, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    write_json_file(path, obj)


def write_json_file(path, obj):
    """Write ``obj`` as JSON to ``path`` atomically (a temporary file, then a rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


def heartbeat(text):
    """Tell the parent that progress was made (it watches the file's size and mtime)."""
    path = os.environ.get("MGPU_DOCTOR_HEARTBEAT")
    if path:
        with open(path, "a") as fh:
            fh.write(text + "\n")


def describe_exception(exc):
    return {
        "type": type(exc).__name__,
        "module": type(exc).__module__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def mapped_libraries(substrings):
    """Paths of shared libraries mapped into this process whose names contain a substring."""
    found = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                name = os.path.basename(path)
                if ".so" in name and any(s in name for s in substrings) and path not in found:
                    found.append(path)
    except (IOError, OSError):
        pass
    return found


def oom_kill_count(cgroup_root="/sys/fs/cgroup", self_cgroup="/proc/self/cgroup", vmstat="/proc/vmstat"):
    """How many processes the kernel's OOM killer has killed so far, or None when unknown.

    From this process's cgroup: v2 ``memory.events`` (``oom_kill``, counts the cgroup and those
    below it), v1 ``memory.oom_control``; when neither can be read, the whole system's count in
    ``/proc/vmstat``. Only a difference of two readings means anything.
    """
    try:
        with open(self_cgroup) as fh:
            lines = fh.read().splitlines()
    except (IOError, OSError):
        lines = []
    candidates = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            candidates.extend(_up_from(cgroup_root, path, "memory.events"))
        elif "memory" in controllers.split(","):
            candidates.extend(_up_from(os.path.join(cgroup_root, "memory"), path, "memory.oom_control"))
    candidates.append(vmstat)
    for path in candidates:
        count = _field(path, "oom_kill")
        if count is not None:
            return count
    return None


def _up_from(root, path, name):
    """``root/path/name``, then the same file in each parent up to ``root`` (a cgroup namespace
    can show a path that is not mounted as such)."""
    parts = [p for p in path.strip("/").split("/") if p and p != ".."]
    out = []
    while True:
        out.append(os.path.join(root, *(parts + [name])))
        if not parts:
            return out
        parts = parts[:-1]


def _field(path, key):
    try:
        with open(path) as fh:
            for line in fh:
                words = line.split()
                if len(words) == 2 and words[0] == key and words[1].isdigit():
                    return int(words[1])
    except (IOError, OSError):
        return None
    return None
