"""The drift rows as findings: one outcome, listed before every section of the report."""

from __future__ import annotations

from mgpu_doctor.model.drift import Drift, DriftRow
from mgpu_doctor.model.findings import CheckOutcome, Finding, Severity, status_for

NAME = "drift"
TITLE = "Nothing changed since the baseline"
FIXES = {
    "drift.check.now-fails": "The check's own finding below says what is wrong; the other drift findings say "
    "what changed since it passed.",
    "drift.smoke.now-fails": "Compare the smoke run's finding with what else changed since the baseline.",
    "drift.gpu.replaced": "A replaced GPU: check its model, memory and links match the others (`mgpu-doctor "
    "check` lists them).",
}


def drift_finding(row: DriftRow) -> Finding:
    evidence = [f"then: {row.then}", f"now: {row.now}"]
    if row.judged_by:
        evidence.append(f"severity from: {', '.join(row.judged_by)}")
    return Finding(
        row.code, row.severity, f"{row.label}: {row.then} -> {row.now}", evidence, fix=FIXES.get(row.code, "")
    )


def drift_outcome(drift: Drift) -> CheckOutcome:
    findings = [drift_finding(row) for row in drift.rows]
    if not findings:
        findings = [
            Finding(
                "drift.none",
                Severity.OK,
                f"{drift.compared} facts, GPUs, checks and smoke runs compared with {drift.baseline}",
            )
        ]
    return CheckOutcome(NAME, TITLE, status_for(findings), findings, section=None)
