"""Reading the known-good run: a snapshot, a JSON report or a Markdown bug report."""

from __future__ import annotations

from pathlib import Path

from mgpu_doctor.checks.base import Check, run_check
from mgpu_doctor.environment.resolve import ResolvedEnvironment, resolve
from mgpu_doctor.errors import BadInput
from mgpu_doctor.model.findings import CheckStatus
from mgpu_doctor.model.redact import mask_snapshot
from mgpu_doctor.model.smoke_runs import SmokeRun, runs_from_report
from mgpu_doctor.model.snapshot import Snapshot, SnapshotLoadError, load_document
from mgpu_doctor.record import record


@record
class Baseline:
    snapshot: Snapshot
    source: str
    checks: dict[str, CheckStatus]  # what each check concluded then
    smoke_runs: list[SmokeRun]


def load_baseline(path: Path, checks: tuple[Check[ResolvedEnvironment], ...]) -> Baseline:
    """The baseline and its verdicts: recorded in its report, else judged again from its snapshot by
    the same checks (bad file: :class:`BadInput`)."""
    try:
        document = load_document(path)
        runs = runs_from_report(document.report_data, str(path))
    except (SnapshotLoadError, ValueError) as exc:
        raise BadInput(f"--baseline {exc}") from None
    snapshot = mask_snapshot(document.snapshot)
    recorded = (document.report_data or {}).get("checks")
    statuses: dict[str, CheckStatus] = {}
    if isinstance(recorded, list):
        for entry in recorded:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                try:
                    statuses[entry["name"]] = CheckStatus(entry.get("status"))
                except ValueError:
                    continue
    else:
        env = resolve(snapshot)
        statuses = {c.name: run_check(c, env).status for c in checks}
    return Baseline(snapshot, str(path), statuses, runs)
