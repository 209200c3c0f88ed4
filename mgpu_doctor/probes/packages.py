"""The diagnosed interpreter and its installed distributions, read in a child of it."""

from __future__ import annotations

from typing import Any

from mgpu_doctor.facts import Unavailable, failed
from mgpu_doctor.probes.interpreter import Interpreter
from mgpu_doctor.snapshot import PackageFacts, PythonFacts

PACKAGES_TIMEOUT_S = 30.0


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
        why = failed(
            f"package probe under {interpreter.executable} {outcome.failure_summary()}",
            cause="child-failed",
        )
        return why, why, ""
    try:
        return _parse(outcome.result, interpreter)
    except (KeyError, TypeError, ValueError) as exc:
        why = failed(f"package probe returned malformed data: {exc!r}", cause="bad-result")
        return why, why, ""


def _parse(
    data: dict[str, Any], interpreter: Interpreter
) -> tuple[PythonFacts, PackageFacts, str]:
    py = data["python"]
    python = PythonFacts(
        version=str(py["version"]),
        executable=str(py["executable"]),
        implementation=str(py["implementation"]),
        prefix=str(py["prefix"]),
        site_packages=[str(p) for p in py["site_packages"]],
        is_doctor_interpreter=interpreter.is_doctor,
    )
    packages = PackageFacts(
        versions={str(k): str(v) for k, v in data["versions"].items()},
        locations={str(k): str(v) for k, v in data["locations"].items()},
        requires={str(k): [str(r) for r in v] for k, v in data["requires"].items()},
        shadowed={str(k): [str(x) for x in v] for k, v in data.get("shadowed", {}).items()},
    )
    return python, packages, str(data.get("libc", ""))
