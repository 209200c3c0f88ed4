"""The Markdown report: ready to paste into an issue or a CI summary."""

from __future__ import annotations

from tabulate import tabulate

from mgpu_doctor.findings import CheckStatus, Finding, Severity
from mgpu_doctor.report import Report
from mgpu_doctor.reporters import RenderOptions
from mgpu_doctor.reporters.common import (
    DEVICE_HEADERS,
    FLEET_HEADERS,
    acknowledgement_line,
    device_table_rows,
    fleet_difference_rows,
    fleet_heading,
    summary_line,
)
from mgpu_doctor.reporters.mermaid import pictures_markdown

STATUS_WORDS = {
    CheckStatus.PASSED: "✅ passed", CheckStatus.INFO: "ℹ️ info", CheckStatus.WARNING: "⚠️ warning",
    CheckStatus.FAILED: "❌ failed", CheckStatus.SKIPPED: "⏭️ skipped", CheckStatus.CRASHED: "💥 crashed",
}


def render(report: Report, options: RenderOptions) -> str:
    out = [f"# mgpu-doctor {report.tool_version}: {report.source}", "", f"**{summary_line(report)}**", ""]
    rows = [[c.title, f"`{c.name}`", STATUS_WORDS[c.status],
             _cell(c.skip_reason or "; ".join(f.title for f in c.findings))]
            for c in report.checks]
    out += [tabulate(rows, headers=["Check", "Name", "Status", "Details"], tablefmt="github",
                     disable_numparse=True), ""]
    problems = [f for f in report.findings if f.severity >= Severity.WARNING or options.verbose]
    if problems:
        out += ["## Findings", ""]
        for f in problems:
            out += finding_lines(f)
    out += pictures_markdown(report.smoke_runs)
    if report.fleet is not None:
        out += ["## Differences between nodes", "", fleet_heading(report), ""]
        differences = fleet_difference_rows(report)
        if differences:
            out += [tabulate([[_cell(c) for c in r] for r in differences], headers=FLEET_HEADERS,
                             tablefmt="github", disable_numparse=True), ""]
    devices = device_table_rows(report)
    if devices:
        out += ["## GPUs", "", tabulate([[r[k] for k in DEVICE_HEADERS] for r in devices],
                                       headers=list(DEVICE_HEADERS.values()), tablefmt="github",
                                       disable_numparse=True), ""]
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def finding_lines(f: Finding) -> list[str]:
    """One finding as Markdown: heading, code, acknowledgement, evidence, fix, links."""
    out = [f"### {f.severity.value}: {f.title}", "", f"Code: `{f.code}`", ""]
    if f.acknowledgement is not None:
        out += [f"**{acknowledgement_line(f)}**", ""]
    if f.evidence:
        out += ["```text", *f.evidence, "```", ""]
    if f.fix:
        out += [f"**Fix:** {f.fix}", ""]
    out += [f"See: {link}" for link in f.links] + ([""] if f.links else [])
    return out
