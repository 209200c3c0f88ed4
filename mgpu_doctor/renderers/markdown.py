"""The Markdown report: ready to paste into an issue or a CI summary."""

from __future__ import annotations

from mgpu_doctor.model.findings import CheckStatus, Finding, Severity
from mgpu_doctor.model.report import Report
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.common import (
    DEVICE_HEADERS,
    FLEET_HEADERS,
    acknowledgement_line,
    device_table_rows,
    fleet_difference_rows,
    fleet_heading,
    summary_line,
)
from mgpu_doctor.renderers.mermaid import pictures_markdown
from mgpu_doctor.renderers.tables import table

STATUS_WORDS = {
    CheckStatus.PASSED: "✅ passed", CheckStatus.INFO: "ℹ️ info", CheckStatus.WARNING: "⚠️ warning",
    CheckStatus.FAILED: "❌ failed", CheckStatus.SKIPPED: "⏭️ skipped", CheckStatus.CRASHED: "💥 crashed",
}


def render(report: Report, options: RenderOptions) -> str:
    level = f" (level {report.level})" if report.level else ""
    out = [f"# mgpu-doctor {report.tool_version}: {report.source}{level}", "",
           f"**{summary_line(report)}**", ""]
    rows = [[c.title, f"`{c.name}`", STATUS_WORDS[c.status],
             _cell(c.skip_reason or "; ".join(f.title for f in c.findings))]
            for c in report.checks]
    out += [table(rows, ["Check", "Name", "Status", "Details"], "github"), ""]
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
            out += [table([[_cell(c) for c in r] for r in differences], FLEET_HEADERS,
                           "github"), ""]
    devices = device_table_rows(report)
    if devices:
        out += ["## GPUs", "", table([[r[k] for k in DEVICE_HEADERS] for r in devices],
                                   list(DEVICE_HEADERS.values()), "github"), ""]
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
