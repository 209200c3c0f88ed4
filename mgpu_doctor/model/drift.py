"""The drift section of a report: one row per change since the baseline (computed by ``drift/``)."""

from __future__ import annotations

from mgpu_doctor.model.findings import Severity
from mgpu_doctor.record import field, record


@record
class DriftRow:
    """One change: what (``label``), its value then and now, the finding code and severity it
    makes, and the checks whose verdict decided that severity (empty: the change alone)."""

    code: str
    label: str
    then: str
    now: str
    severity: Severity
    judged_by: list[str] = field(default_factory=list)


@record
class Drift:
    """Everything that changed since ``baseline`` (a snapshot or report, written ``baseline_created``)."""

    baseline: str
    baseline_created: str
    rows: list[DriftRow]
    compared: int = 0  # how many facts, GPUs, checks and smoke runs were compared
