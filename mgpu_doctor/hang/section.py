"""`mgpu-doctor hang` and `report --hang` as one call each: read the job (py-spy first: without it
there is nothing to read), judge the reading against the known hangs; and a reading a report
recorded, read back for `check --from`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mgpu_doctor.errors import BadInput
from mgpu_doctor.hang import discover
from mgpu_doctor.hang.gpus import gpu_holders
from mgpu_doctor.hang.pyspy import DUMP_TIMEOUT_S, PySpy, PySpyMissing, find_pyspy
from mgpu_doctor.hang.read import INTERVAL_S, read_job
from mgpu_doctor.hang.verdict import hang_outcome
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import CheckOutcome
from mgpu_doctor.model.hang import HangReading
from mgpu_doctor.model.serde import SchemaError, from_jsonable
from mgpu_doctor.record import record


@record
class HangRequest:
    """Which processes to read, and how."""

    pids: tuple[int, ...] = ()  # none: find them (NVML, TF_CONFIG)
    slurm_job: str = ""
    native: bool = False
    interval_s: float = INTERVAL_S
    timeout_s: float = DUMP_TIMEOUT_S
    pyspy: str | None = None  # py-spy's path; None: beside the doctor's Python, else on PATH


def read_hang(request: HangRequest, nvml: Any | None = None) -> HangReading:
    """Read the job's processes (bad input, py-spy missing, no process: BadInput, exit 2)."""
    try:
        spy = PySpy(find_pyspy(request.pyspy), native=request.native, timeout_s=request.timeout_s)
    except PySpyMissing as exc:
        raise BadInput(str(exc)) from None
    holders = gpu_holders(nvml)
    if request.pids:
        targets = discover.given(request.pids)
    elif request.slurm_job:
        targets = discover.slurm_job(request.slurm_job)
    else:
        targets = discover.found(holders)
    targets = discover.with_workers(targets, holders)
    return read_job(targets.pids, targets.found_by, spy, holders, request.interval_s, serves=targets.serves)


def hang_check(reading: HangReading, matrix_dirs: tuple[Path, ...] = ()) -> CheckOutcome:
    """The verdict, with the known hangs of the bundled matrix and a team's (``--matrix DIR``)."""
    return hang_outcome(reading, load_matrix(bundled_matrix_dir(), matrix_dirs).issues)


def recorded_hang(report_data: dict[str, Any] | None, source: str) -> HangReading | None:
    """The hang reading a report recorded (`report --hang`); None where it has none."""
    raw = (report_data or {}).get("hang")
    if raw is None:
        return None
    try:
        return from_jsonable(HangReading, raw, "report.hang")
    except SchemaError as exc:
        raise BadInput(f"{source}: {exc}") from None
