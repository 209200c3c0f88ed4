"""JAX's own view, gathered in a child process: the doctor never imports JAX.

The child runs with ``XLA_PYTHON_CLIENT_PREALLOCATE=false``: JAX's default is to take 75 % of
every GPU's memory when its GPU client starts (https://docs.jax.dev/en/latest/gpu_memory_allocation.html),
and a doctor must not hold memory a training needs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mgpu_doctor.model.snapshot import JaxDevice, JaxFacts, PackageFacts
from mgpu_doctor.model.unavailable import Unavailable, absent, failed, interpreter_broken, skipped
from mgpu_doctor.process.childproc import ChildOutcome
from mgpu_doctor.process.interpreter import Interpreter

JAX_PROBE_TIMEOUT_S = 120.0
MAX_DETAIL_LINES = 12
# What the child adds to the user's environment: no preallocation while it lists the devices.
CHILD_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def jax_installed(packages: PackageFacts | Unavailable) -> bool | None:
    """Whether the ``jax`` distribution is installed; None when the packages are unknown."""
    if isinstance(packages, Unavailable):
        return None
    return "jax" in packages.versions


def gather_jax(interpreter: Interpreter, packages: PackageFacts | Unavailable, quick: bool = False,
               timeout_s: float = JAX_PROBE_TIMEOUT_S, environ: Mapping[str, str] | None = None
               ) -> JaxFacts | Unavailable:
    if jax_installed(packages) is False:
        return absent(f"JAX is not installed for {interpreter.executable}", cause="not-installed")
    if quick:
        return skipped("--quick: JAX is not imported", cause="quick")
    if interpreter_broken(packages):
        assert isinstance(packages, Unavailable)
        return failed(packages.detail.splitlines()[0], cause=packages.cause)
    problem = interpreter.problem()
    if problem:
        return failed(problem, cause="bad-interpreter")
    env = {**(os.environ if environ is None else environ), **CHILD_ENV}
    outcome = interpreter.run_script("jax_probe.py", timeout_s=timeout_s, env=env)
    return jax_facts_from_outcome(outcome)


def jax_facts_from_outcome(outcome: ChildOutcome) -> JaxFacts | Unavailable:
    if outcome.start_error:
        return failed(f"the JAX probe {outcome.failure_summary()}", cause="child-not-started")
    if outcome.timed_out:
        return failed(f"`import jax` {outcome.failure_summary()}. Python stacks at that moment:\n"
                      + _last_lines(outcome.stacks or outcome.stderr_tail), cause="timeout")
    if outcome.signal_name:
        return failed(f"the JAX probe {outcome.failure_summary()}:\n" + _last_lines(outcome.stderr_tail),
                      cause=f"signal:{outcome.signal_name}")
    data = outcome.result
    if not isinstance(data, dict):
        return failed(f"the JAX probe {outcome.failure_summary()}:\n" + _last_lines(outcome.stderr_tail),
                      cause="child-failed")
    if "import_error" in data:
        err = data["import_error"]
        return failed(f"{err.get('type', 'Error')}: {err.get('message', '')}".strip(),
                      cause=f"exception:{err.get('type', 'Error')}")
    try:
        return parse_jax_result(data)
    except (KeyError, TypeError, ValueError) as exc:
        return failed(f"the JAX probe returned malformed data: {exc!r}", "bad-result")


def parse_jax_result(data: dict[str, Any]) -> JaxFacts:
    devices: list[JaxDevice] | Unavailable
    backend: str | Unavailable
    if data.get("device_error"):
        err = data["device_error"]
        devices = failed(f"jax.devices() raised {err.get('type')}: {err.get('message')}",
                         cause=f"exception:{err.get('type')}")
        backend = devices
    else:
        devices = [JaxDevice(id=int(d["id"]), platform=str(d["platform"]),
                             device_kind=str(d.get("device_kind", "")),
                             local_hardware_id=(int(d["local_hardware_id"])
                                                if d.get("local_hardware_id") is not None else None))
                   for d in data["devices"]]
        backend = str(data["default_backend"]) if data.get("default_backend") else absent("not reported")
    jaxlib = data.get("jaxlib_version")
    return JaxFacts(
        version=str(data["version"]),
        jaxlib_version=str(jaxlib) if jaxlib else absent("jaxlib reports no version"),
        module_path=str(data.get("module_path", "")),
        plugins={str(k): str(v) for k, v in (data.get("plugins") or {}).items()},
        default_backend=backend,
        devices=devices,
        import_seconds=float(data.get("import_seconds", 0.0)),
        plugin_wheels_missing=[str(n) for n in data.get("plugin_wheels_missing") or []],
        backend_errors={str(k): str(v) for k, v in (data.get("backend_errors") or {}).items()},
        loaded_libraries=[str(p) for p in data.get("loaded_libraries") or []],
        warnings=[str(w) for w in data.get("warnings") or []],
    )


def _last_lines(text: str, count: int = MAX_DETAIL_LINES) -> str:
    lines = [line for line in text.rstrip().splitlines() if line.strip()]
    return "\n".join(lines[-count:])
