"""The Markdown report: ready to paste into an issue or a CI summary."""

from __future__ import annotations

from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Severity, condition_groups
from mgpu_doctor.model.report import Report
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.common import (
    DEVICE_HEADERS,
    DRIFT_HEADERS,
    FLEET_HEADERS,
    acknowledgement_line,
    device_table_rows,
    drift_heading,
    drift_rows,
    fleet_difference_rows,
    fleet_heading,
    group_line,
    summary_line,
    training_parts,
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
    out += drift_markdown(report)
    rows = [[c.title, f"`{c.name}`", STATUS_WORDS[c.status],
             _cell(c.skip_reason or check_details(c))]
            for c in report.checks]
    out += [table(rows, ["Check", "Name", "Status", "Details"], "github"), ""]
    out += training_markdown(report)
    problems = [f for f in report.findings if (f.severity >= Severity.WARNING or options.verbose)
                and f.condition is None]
    if problems:
        out += ["## Findings", ""]
        for f in problems:
            out += finding_lines(f)
    out += conditional_markdown(report.findings, options.verbose)
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


def drift_markdown(report: Report) -> list[str]:
    """What changed since the baseline, shown first: the reason a gate that passed now fails."""
    if report.drift is None:
        return []
    out = ["## Changes since the baseline", "", drift_heading(report), ""]
    if report.drift.rows:
        out += [table([[_cell(c) for c in r] for r in drift_rows(report)], DRIFT_HEADERS, "github"), ""]
    return out


def check_details(c: CheckOutcome) -> str:
    """A check's findings in a table cell: the titles, the conditional ones counted (listed below)."""
    titles = [f.title for f in c.findings if f.condition is None]
    conditional = sum(1 for f in c.findings if f.condition is not None)
    if conditional:
        titles.append(f"{conditional} conditional known issue(s), grouped below")
    return "; ".join(titles)


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


def training_markdown(report: Report, heading: str = "##") -> list[str]:
    """The training profile: declared and observed facts with where each came from, the unknown."""
    if report.training is None:
        return []
    declared, observed, unknown = training_parts(report.training)
    rows = [["declared", _cell(d)] for d in declared] + [["observed", _cell(o)] for o in observed]
    out = [f"{heading} Training", ""]
    if rows:
        out += [table(rows, ["", "Fact (where it came from)"], "github"), ""]
    else:
        out += ["_Nothing declared or observed: declare how you train in `pyproject.toml` "
                "`[tool.mgpu-doctor.training]` or with `--strategy`, `--usage`, ..._", ""]
    return out + [f"Unknown: {', '.join(unknown) or 'nothing'}", ""]


def conditional_markdown(findings: list[Finding], verbose: bool, heading: str = "##") -> list[str]:
    """The conditional findings grouped by the fact that would decide them; each group's findings
    by title and code (in full with -v)."""
    groups = condition_groups(findings)
    if not groups:
        return []
    out = [f"{heading} Conditional known issues", "",
           "Grouped by the one fact that would decide them: declared, each becomes a warning or "
           "is ruled out.", ""]
    for g in groups:
        out.append(f"- **{_cell(group_line(g))}**")
        out += [f"  - {_cell(f.title)} (`{f.code}`)" for f in g.findings]
    out.append("")
    if verbose:
        for g in groups:
            for f in g.findings:
                out += finding_lines(f)
    return out
