"""The diagnosed interpreter and its installed distributions: read in a child of it, or, for the
doctor's own Python, in-process by the same code (`child_scripts/_package_facts.py`)."""

from __future__ import annotations

import math
import os
import sys
from types import ModuleType
from typing import Any

from mgpu_doctor.errors import BadInput
from mgpu_doctor.model.snapshot import PackageFacts, PythonFacts
from mgpu_doctor.model.unavailable import Unavailable, failed
from mgpu_doctor.process.childproc import ChildOutcome, run_tool
from mgpu_doctor.process.interpreter import CHILD_SCRIPTS, Interpreter

PACKAGES_TIMEOUT_S = 30.0
TIMEOUT_ENV = "MGPU_DOCTOR_PYTHON_TIMEOUT"  # seconds the diagnosed Python has to answer
MIN_PYTHON = (3, 6)  # what the child scripts are written for (a test runs them under 3.6)
SHOWN_LINES = 8
SHOWN_LINE_CHARS = 160


def python_timeout() -> float:
    """How long the first child of the diagnosed Python may take: ``$MGPU_DOCTOR_PYTHON_TIMEOUT``
    seconds, 30 by default (a cold network file system can make a big environment slow)."""
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(text) if text else PACKAGES_TIMEOUT_S
    except ValueError:
        raise BadInput(f"{TIMEOUT_ENV}={text!r}: not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise BadInput(f"{TIMEOUT_ENV}={text!r}: must be a positive number of seconds")
    return value


def gather_python_and_packages(
    interpreter: Interpreter,
) -> tuple[PythonFacts | Unavailable, PackageFacts | Unavailable, str]:
    """Returns the interpreter facts, the package facts and the interpreter's libc string.

    This is the first child the diagnosed Python runs: when it cannot run it, the facts say so
    with a cause in ``INTERPRETER_CAUSES`` and no other probe tries that Python again.
    """
    problem = interpreter.problem()
    if problem:
        gone = failed(problem, cause="bad-interpreter")
        return gone, gone, ""
    if reads_in_process(interpreter):
        return _parse(_package_facts().facts(sys.path[1:]))
    outcome = interpreter.run_script("packages_probe.py", timeout_s=python_timeout())
    if not outcome.ok:
        why = interpreter_failure(interpreter, outcome)
        return why, why, ""
    try:
        return _parse(outcome.result)
    except (KeyError, TypeError, ValueError) as exc:
        why = failed(f"package probe returned malformed data: {exc!r}", cause="bad-result")
        return why, why, ""


def reads_in_process(interpreter: Interpreter) -> bool:
    """Whether the doctor's own process sees the path a child of ``interpreter`` would: the same
    executable, started without the options that change the path (-I, -E, -s, -S, -P), its
    first folder still the one Python put there.

    A child's path is its script's folder, then the path every start of that Python builds; the
    doctor's is its own first folder (the console script's, or the working directory with ``-m``
    and ``-c``), then the same. A host that put a folder first (pytest, a notebook) gets the
    child. Starting a Python cost the quick check a fifth of its time."""
    flags = sys.flags
    changed = (flags.isolated or flags.ignore_environment or flags.no_user_site or flags.no_site
               or getattr(flags, "safe_path", False))
    if interpreter.executable != sys.executable or changed or not sys.path:
        return False
    try:
        first = os.path.realpath(sys.path[0] or os.curdir)
        started = {os.path.realpath(os.curdir)} | ({os.path.dirname(os.path.realpath(sys.argv[0]))}
                                                   if sys.argv and sys.argv[0] not in ("", "-c") else set())
    except OSError:  # the working directory was deleted: the child says what that Python sees
        return False
    return first in started


def _package_facts() -> ModuleType:
    """`child_scripts/_package_facts.py`, loaded from its file: the child scripts are no package
    (they run in the diagnosed Python without mgpu-doctor), and this one has no import side effects."""
    import importlib.util

    name = "mgpu_doctor_package_facts"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, CHILD_SCRIPTS / "_package_facts.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


def interpreter_failure(interpreter: Interpreter, outcome: ChildOutcome) -> Unavailable:
    """Why the diagnosed Python could not run a small standard-library script: what was run,
    how it ended, and what it printed (trimmed)."""
    script = CHILD_SCRIPTS / "packages_probe.py"
    ran = f"ran: {interpreter.executable} {script}"
    if outcome.start_error:
        return failed("\n".join([f"{interpreter.executable} could not be started: {outcome.start_error}",
                                 ran]), cause="interpreter-not-started")
    if outcome.timed_out:
        return failed("\n".join([
            f"{interpreter.executable} did not answer within {outcome.duration_s:.0f} s; it was killed "
            f"with every process it had started", ran, *_printed(outcome)]), cause="interpreter-timeout")
    too_old = _too_old(interpreter.executable) if outcome.returncode not in (0, None) else ""
    if too_old:
        return failed("\n".join([too_old, ran]), cause="python-too-old")  # its SyntaxError says no more
    return failed("\n".join([f"{interpreter.executable} does not run mgpu-doctor's probe: it "
                             f"{outcome.failure_summary()}", ran, *_printed(outcome)]),
                  cause="bad-interpreter")


def _printed(outcome: ChildOutcome) -> list[str]:
    """What the child printed, a few lines of each stream, or that it printed nothing."""
    lines = []
    for name, text, first in (("stdout", outcome.stdout, True), ("stderr", outcome.stderr, False)):
        shown = [line for line in text.splitlines() if line.strip()]
        if not shown:
            continue
        picked = shown[:SHOWN_LINES] if first else shown[-SHOWN_LINES:]
        more = len(shown) - len(picked)
        not_text = " (output that is not UTF-8 text)" if "\ufffd" in text else ""
        hidden = f", {more} more lines not shown" if more else ""
        lines.append(f"it printed on {name}{not_text}{hidden}:")
        lines += ["  " + _cut(line) for line in picked]
    return lines or ["it printed nothing"]


def _cut(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= SHOWN_LINE_CHARS else line[:SHOWN_LINE_CHARS - 3] + "..."


def _too_old(executable: str) -> str:
    """Only asked after a failure: is the interpreter older than the children support?"""
    done = run_tool([executable, "--version"], timeout_s=min(10.0, python_timeout()))
    words = (done.stdout + "\n" + done.stderr).split()
    if len(words) >= 2 and words[0] == "Python":
        parts = words[1].split(".")
        if (parts[0].isdecimal() and parts[1:2] and parts[1].isdecimal()
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
