"""The pipelines of `devices` and `snapshot` (diagnose.py's siblings): this machine's facts, gathered
for the command line to print or write, with no verdict but whether the diagnosed Python works."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.interpreter import check_interpreter
from mgpu_doctor.environment.devices import device_rows
from mgpu_doctor.model.device_row import DeviceRow
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.redact import Identity, redact_snapshot
from mgpu_doctor.model.snapshot import KIND, SCHEMA_VERSION, NvmlFacts, Snapshot
from mgpu_doctor.model.unavailable import Unavailable, skipped
from mgpu_doctor.probes.envvars import gather_env
from mgpu_doctor.probes.gather import GatherOptions, gather_snapshot
from mgpu_doctor.probes.host import gather_host
from mgpu_doctor.probes.nvml import gather_nvml
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import record


@record
class DeviceTable:
    """`devices`: what NVML says (or why it said nothing) and one row per GPU."""

    nvml: NvmlFacts | Unavailable
    rows: list[DeviceRow]


def device_table(nvml_module: Any = None) -> DeviceTable:
    """NVML alone, fast, no TensorFlow; ``nvml_module``: a fake NVML for tests."""
    nvml = gather_nvml(nvml_module)
    nothing = skipped("not gathered by `devices`")
    snap = Snapshot(SCHEMA_VERSION, KIND, "", "", gather_host(), nothing, nothing, gather_env(),
                    nvml, nothing)
    return DeviceTable(nvml, device_rows(snap))


@record
class MachineSnapshot:
    """`snapshot`: every fact, and the findings that say the diagnosed Python does not work (its
    facts in the snapshot are then failed facts)."""

    snapshot: Snapshot
    broken_interpreter: list[Finding]


def machine_snapshot(interpreter: Interpreter, *, quick: bool, redact: bool,
                     progress: Callable[..., None]) -> MachineSnapshot:
    snapshot = gather_snapshot(GatherOptions(interpreter, quick=quick), progress)
    if redact:
        snapshot = redact_snapshot(snapshot, Identity.current())
    return MachineSnapshot(snapshot, interpreter_errors(snapshot))


def interpreter_errors(snapshot: Snapshot) -> list[Finding]:
    """The `interpreter` check's errors, as `check` says them."""
    try:
        findings = check_interpreter(snapshot)
    except CheckSkipped:
        return []
    return [f for f in findings if f.severity >= Severity.ERROR]
