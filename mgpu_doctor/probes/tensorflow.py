"""TensorFlow's own view, gathered in a child process: the doctor never imports TensorFlow."""

from __future__ import annotations

import functools
import re
from typing import Any

from mgpu_doctor.model.distributions import TF_DISTRIBUTIONS
from mgpu_doctor.model.snapshot import PackageFacts, TensorFlowFacts, TfDevice
from mgpu_doctor.model.unavailable import Unavailable, absent, failed, interpreter_broken
from mgpu_doctor.process.childproc import ChildOutcome
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace

TF_PROBE_TIMEOUT_S = 120.0
MAX_DETAIL_LINES = 12


def tensorflow_installed(packages: PackageFacts | Unavailable) -> bool | None:
    """Whether a TensorFlow distribution is installed; None when the packages are unknown."""
    if isinstance(packages, Unavailable):
        return None
    return any(name in packages.versions for name in TF_DISTRIBUTIONS)


def gather_tensorflow(
    interpreter: Interpreter,
    packages: PackageFacts | Unavailable,
    timeout_s: float = TF_PROBE_TIMEOUT_S,
) -> TensorFlowFacts | Unavailable:
    if tensorflow_installed(packages) is False:
        return absent(
            f"no TensorFlow distribution is installed for {interpreter.executable}",
            cause="not-installed",
        )
    if interpreter_broken(packages):  # the package probe found it does not work: not again
        assert isinstance(packages, Unavailable)
        return failed(packages.detail.splitlines()[0], cause=packages.cause)
    problem = interpreter.problem()
    if problem:
        return failed(problem, cause="bad-interpreter")
    outcome = interpreter.run_script("tensorflow_probe.py", timeout_s=timeout_s)
    return tensorflow_facts_from_outcome(outcome)


def tensorflow_facts_from_outcome(outcome: ChildOutcome) -> TensorFlowFacts | Unavailable:
    if outcome.start_error:
        return failed(f"the TensorFlow probe {outcome.failure_summary()}", cause="child-not-started")
    if outcome.timed_out:
        return failed(
            f"`import tensorflow` {outcome.failure_summary()}. Python stacks at that moment:\n"
            + _last_lines(outcome.stacks or outcome.stderr_tail, MAX_DETAIL_LINES),
            cause="timeout",
        )
    if outcome.signal_name:
        return failed(
            f"the TensorFlow probe {outcome.failure_summary()}:\n"
            + _last_lines(outcome.stderr_tail, MAX_DETAIL_LINES),
            cause=f"signal:{outcome.signal_name}",
        )
    data = outcome.result
    if not isinstance(data, dict):
        return failed(
            f"the TensorFlow probe {outcome.failure_summary()}:\n"
            + _last_lines(outcome.stderr_tail, MAX_DETAIL_LINES),
            cause="child-failed",
        )
    if "import_error" in data:
        err = data["import_error"]
        return failed(
            f"{err.get('type', 'Error')}: {err.get('message', '')}".strip(),
            cause=f"exception:{err.get('type', 'Error')}",
        )
    try:
        facts = _parse(data)
    except (KeyError, TypeError, ValueError) as exc:
        return failed(f"the TensorFlow probe returned malformed data: {exc!r}", "bad-result")
    said = notable_log_lines(outcome.stderr_tail)
    return replace(facts, warnings=facts.warnings + said) if said else facts


# Compiled on first use: only a TensorFlow probe's log is read with it, never by `check --quick`.
@functools.cache
def notable_log() -> re.Pattern[str]:
    """TensorFlow's C++ log lines that explain why GPUs are missing."""
    return re.compile(
        r"Cannot dlopen some GPU libraries|Could not load dynamic library|failed call to cuInit|"
        r"Could not find cuda drivers|Skipping registering GPU devices|"
        r"CUDA driver version is insufficient|Ignoring visible gpu device"
    )


def notable_log_lines(stderr: str) -> list[str]:
    lines = []
    for line in stderr.splitlines():
        if notable_log().search(line):
            text = re.sub(r"^[IWEF]\d{4} [\d:. ]+\d+ \S+\] ", "", line.strip())
            if text not in lines:
                lines.append(text)
    return lines[:8]


def _parse(data: dict[str, Any]) -> TensorFlowFacts:
    keras = data.get("keras") or {}
    if "error" in keras:
        keras_module: str | Unavailable = failed(f"tf.keras failed: {keras['error']}")
        keras_version: str | Unavailable = keras_module
    else:
        keras_module = str(keras.get("module") or "") or absent("tf.keras has no module name")
        version = keras.get("version")
        keras_version = str(version) if version else absent("tf.keras reports no version")
    built = data.get("built_with_cuda")
    devices: list[TfDevice] | Unavailable
    if data.get("device_error"):
        err = data["device_error"]
        devices = failed(
            f"tf.config.list_physical_devices() raised {err.get('type')}: {err.get('message')}",
            cause=f"exception:{err.get('type')}",
        )
    else:
        devices = [
            TfDevice(
                name=str(d["name"]),
                device_type=str(d["device_type"]),
                details={str(k): str(v) for k, v in (d.get("details") or {}).items()},
            )
            for d in data["physical_devices"]
        ]
    return TensorFlowFacts(
        version=str(data["version"]),
        module_path=str(data.get("module_path", "")),
        keras_module=keras_module,
        keras_version=keras_version,
        build_info={str(k): str(v) for k, v in data["build_info"].items()},
        built_with_cuda=bool(built) if built is not None else absent("not reported"),
        physical_devices=devices,
        loaded_libraries=[str(p) for p in data.get("loaded_libraries", [])],
        loaded_after_import=[str(p) for p in data.get("loaded_after_import", [])],
        import_seconds=float(data.get("import_seconds", 0.0)),
        warnings=[str(w) for w in data.get("warnings", [])],
    )


def _last_lines(text: str, count: int) -> str:
    lines = [line for line in text.rstrip().splitlines() if line.strip()]
    return "\n".join(lines[-count:])
