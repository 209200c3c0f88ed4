"""Shared helpers of mgpu-doctor's child scripts (Python 3.6+, standard library only)."""

import faulthandler
import json
import os
import signal
import sys
import traceback


def install_stack_dumps():
    """Dump every thread's Python stack on a crash, and on SIGUSR1 when the parent asks."""
    faulthandler.enable(all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)


def write_result(obj):
    """Write the JSON result atomically, so the parent never reads half a file."""
    path = os.environ.get("MGPU_DOCTOR_RESULT")
    if not path:
        json.dump(obj, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
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
