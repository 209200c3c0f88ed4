"""The diagnosed interpreter and its installed distributions, read in a child of it."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from mgpu_doctor.facts import Unavailable, failed
from mgpu_doctor.probes.interpreter import Interpreter
from mgpu_doctor.snapshot import PackageFacts, PythonFacts

PACKAGES_TIMEOUT_S = 30.0
MIN_PYTHON = (3, 6)


def gather_python_and_packages(
    interpreter: Interpreter,
) -> tuple[PythonFacts | Unavailable, PackageFacts | Unavailable, str]:
    """Returns the interpreter facts, the package facts and the interpreter's libc string."""
    problem = interpreter.problem()
    if problem:
        gone = failed(problem, cause="bad-interpreter")
        return gone, gone, ""
    outcome = interpreter.run_script("packages_probe.py", timeout_s=PACKAGES_TIMEOUT_S)
    if not outcome.ok:
        too_old = _too_old(interpreter.executable)
        why = failed(
            too_old or f"package probe under {interpreter.executable} {outcome.failure_summary()}",
            cause="python-too-old" if too_old else "child-failed",
        )
        return why, why, ""
    try:
        return _parse(outcome.result)
    except (KeyError, TypeError, ValueError) as exc:
        why = failed(f"package probe returned malformed data: {exc!r}", cause="bad-result")
        return why, why, ""


def _too_old(executable: str) -> str:
    """Only asked after a failure: is the interpreter older than the children support?"""
    try:
        done = subprocess.run([executable, "--version"], capture_output=True, text=True,
                              timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    words = (done.stdout + done.stderr).split()
    if len(words) >= 2 and words[0] == "Python":
        parts = words[1].split(".")
        if (parts[0].isdigit() and parts[1:2] and parts[1].isdigit()
                and (int(parts[0]), int(parts[1])) < MIN_PYTHON):
            return (f"{executable} is Python {words[1]}; mgpu-doctor can diagnose Python "
                    f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer")
    return ""


def _parse(data: dict[str, Any]) -> tuple[PythonFacts, PackageFacts, str]:
    py = data["python"]
    python = PythonFacts(
        version=str(py["version"]),
        executable=str(py["executable"]),
        implementation=str(py["implementation"]),
        prefix=str(py["prefix"]),
        site_packages=[str(p) for p in py["site_packages"]],
        # A venv's python is often a symlink to the base one: the prefix tells them apart.
        is_doctor_interpreter=os.path.realpath(str(py["prefix"])) == os.path.realpath(sys.prefix),
    )
    packages = PackageFacts(
        versions={str(k): str(v) for k, v in data["versions"].items()},
        locations={str(k): str(v) for k, v in data["locations"].items()},
        requires={str(k): [str(r) for r in v] for k, v in data["requires"].items()},
        shadowed={str(k): [str(x) for x in v] for k, v in data.get("shadowed", {}).items()},
    )
    return python, packages, str(data.get("libc", ""))
