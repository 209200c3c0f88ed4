"""The diagnosed Python itself: an interpreter that cannot run a small script is the first error.

The training runs under that interpreter; every other fact about its environment comes from
children of it. When it does not work (it is not Python, hangs, is too old, cannot be started),
the other checks are skipped for that reason, and this one says what was run, what it printed
and what to do.
"""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import skip_reason
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable, interpreter_broken

POINT_AT_IT = ("`--python` must name the Python 3 interpreter of the environment you train with, for "
               "example /path/to/venv/bin/python or $(conda run -n ENV which python).")
FIXES = {  # cause -> (finding code, fix); {python} is the interpreter
    "python-too-old": (
        "interpreter.too-old",
        "Point --python at the Python 3 interpreter you train with; mgpu-doctor's probes need "
        "Python 3.6 or newer."),
    "interpreter-timeout": (
        "interpreter.no-answer",
        "Run `{python} -c 'print(1)'` yourself: when it hangs too, look for a wrapper that waits "
        "for input, a hung network file system, or a .pth file in site-packages that blocks; on a "
        "slow file system raise MGPU_DOCTOR_PYTHON_TIMEOUT (seconds, default 30)."),
    "interpreter-not-started": (
        "interpreter.cannot-start",
        "Check that the file is a Python executable built for this machine, that its #! line names "
        "an interpreter that exists, and that you may execute it. " + POINT_AT_IT),
    "bad-interpreter": (
        "interpreter.not-working",
        "Run `{python} -c 'import sys; print(sys.version)'` to see what it does. " + POINT_AT_IT),
}


CODES = (
    "interpreter.runs",
    "interpreter.too-old",
    "interpreter.no-answer",
    "interpreter.cannot-start",
    "interpreter.not-working",
)


def check_interpreter(snapshot: Snapshot) -> list[Finding]:
    python = snapshot.python
    if snapshot.pasted is not None:
        raise CheckSkipped("a pasted text: no interpreter ran here")
    if not isinstance(python, Unavailable):
        return [Finding("interpreter.runs", Severity.OK, f"Python {python.version}",
                        evidence=[f"executable: {python.executable}", f"prefix: {python.prefix}"])]
    if interpreter_broken(python):
        return [interpreter_finding(python)]
    raise CheckSkipped(skip_reason("the diagnosed Python", python))


def interpreter_finding(python: Unavailable) -> Finding:
    """The error for a diagnosed Python that does not work (also shown by `smoke`)."""
    code, fix = FIXES.get(python.cause, FIXES["bad-interpreter"])
    lines = [line for line in python.detail.splitlines() if line.strip()]
    first = lines[0] if lines else python.detail
    executable = first.split(" ", 1)[0] if first.startswith("/") else "python"
    return Finding(code, Severity.ERROR, f"The diagnosed Python does not work: {first}", lines[1:],
                   fix=fix.replace("{python}", executable))
