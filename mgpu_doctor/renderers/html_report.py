"""The HTML report: one self-contained file for CI artifacts.

Inline CSS, charts as inline SVG, no script and nothing fetched, so it opens offline from an
artifact store. It holds the whole report: summary, findings, the smoke table and pictures,
every check with every finding, the device, library and fleet tables, and the report as JSON.
"""

from __future__ import annotations

import json
import re
from html import escape

from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Severity, condition_groups
from mgpu_doctor.model.redact import map_strings
from mgpu_doctor.model.report import Report
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.charts import GROUPS, all_charts
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
    printable,
    summary_line,
    training_parts,
)
from mgpu_doctor.renderers.human import libraries_lines
from mgpu_doctor.renderers.smoke_table import SIMULATED_LINE, SMOKE_HEADERS, smoke_rows
from mgpu_doctor.renderers.svg import render_svg

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #1d1d1d;
       padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
pre { background: #f6f6f6; padding: .5em; overflow-x: auto; white-space: pre-wrap; font-size: .85em; }
.summary { font-weight: bold; padding: .5em; background: #f2f6fb; border-left: 4px solid #4a78b0; }
.badge { display: inline-block; min-width: 5.5em; text-align: center; border-radius: 3px;
         padding: 0 .4em; font-size: .85em; font-weight: bold; color: #fff; }
.ok, .passed { background: #2e7d32; } .info { background: #1565c0; } .warning { background: #c77800; }
.error, .failed { background: #c62828; } .crash, .crashed { background: #6a1b9a; }
.skipped { background: #757575; }
.finding { margin: .4em 0 .8em 1.2em; }
.fix { margin: .2em 0; } .note { font-style: italic; color: #8a4b00; }
figure { margin: 1em 0; } svg.chart { max-width: 100%; height: auto; border: 1px solid #ddd; }
details > summary { cursor: pointer; }
"""


def render(report: Report, options: RenderOptions, *, title: str = "") -> str:
    data = json.dumps(to_jsonable(report), indent=2)  # JSON writes control characters as \u escapes
    # HTML escaping leaves ESC, BEL and bidi controls as they are: write them out, as on a terminal.
    report = map_strings(report, printable, keep=frozenset())
    heading = printable(title or f"mgpu-doctor {report.tool_version}: {report.source}")
    out = ["<!doctype html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{escape(heading)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
           f"<h1>{escape(heading)}</h1>", f'<p class="summary">{escape(summary_line(report))}</p>']
    if report.drift is not None:  # what changed comes first: the reason a gate that passed now fails
        out += ["<h2>Changes since the baseline</h2>", f"<p>{escape(drift_heading(report))}</p>"]
        if report.drift.rows:
            out.append(table(DRIFT_HEADERS, drift_rows(report)))
    out += [f'<p class="note">{with_code(note)}</p>' for note in report.notes]
    out += _training(report)
    out += _findings(report, options)
    out += _conditional(report, options)
    out += _smoke(report)
    out += _checks(report)
    out += _tables(report)
    out += ["<h2>The whole report as JSON</h2>", "<details><summary>JSON (as <code>--format json</code> "
            "writes it, without the summary)</summary>", f"<pre>{escape(data)}</pre>", "</details>",
            "</body>", "</html>"]
    return "\n".join(out) + "\n"


def with_code(text: str) -> str:
    """``text`` escaped, its `backticked` commands and names set as <code> (as Markdown shows them)."""
    return re.sub(r"`([^`\n]+)`", r"<code>\1</code>", escape(text))


def _findings(report: Report, options: RenderOptions) -> list[str]:
    floor = Severity.INFO if options.verbose else Severity.WARNING
    problems = sorted((f for f in report.findings if f.severity >= floor and f.condition is None),
                      key=lambda f: f.severity, reverse=True)
    out = ["<h2>Findings</h2>"]
    if not problems:
        return out + [f"<p>No {'findings' if options.verbose else 'warnings or errors'}.</p>"]
    for f in problems:
        out += finding_html(f)
    return out


def _training(report: Report) -> list[str]:
    """The training profile: declared and observed facts with where each came from, the unknown."""
    if report.training is None:
        return []
    declared, observed, unknown = training_parts(report.training)
    rows = [["declared", d] for d in declared] + [["observed", o] for o in observed]
    out = ["<h2>Training</h2>"]
    out.append(table(["", "Fact (where it came from)"], rows) if rows else
               "<p>Nothing declared or observed: declare how you train in <code>pyproject.toml</code> "
               "<code>[tool.mgpu-doctor.training]</code> or with <code>--strategy</code>, "
               "<code>--usage</code>, ...</p>")
    return out + [f"<p>Unknown: {escape(', '.join(unknown) or 'nothing')}</p>"]


def _conditional(report: Report, options: RenderOptions) -> list[str]:
    """The conditional findings grouped by the fact that would decide them, one collapsed block
    per group (open with -v)."""
    groups = condition_groups(report.findings)
    if not groups:
        return []
    out = ["<h2>Conditional known issues</h2>",
           "<p>Grouped by the one fact that would decide them: declared, each becomes a warning or is "
           "ruled out.</p>"]
    opened = " open" if options.verbose else ""
    for g in groups:
        out.append(f"<details{opened}><summary>{escape(group_line(g))}</summary>")
        for f in g.findings:
            out += finding_html(f)
        out.append("</details>")
    return out


def finding_html(f: Finding) -> list[str]:
    """One finding: severity, title, code, acknowledgement, evidence, fix and links."""
    out = ['<div class="finding">',
           f'<p><span class="badge {escape(f.severity.value)}">{escape(f.severity.value)}</span> '
           f"<strong>{with_code(f.title)}</strong> <code>{escape(f.code)}</code></p>"]
    if f.acknowledgement is not None:
        out.append(f"<p><em>{escape(acknowledgement_line(f))}</em></p>")
    if f.evidence:
        out.append(f"<pre>{escape(chr(10).join(f.evidence))}</pre>")
    if f.fix:
        out.append(f'<p class="fix"><strong>Fix:</strong> {with_code(f.fix)}</p>')
    for link in f.links:
        if link.startswith(("https://", "http://")):
            out.append(f'<p>See <a href="{escape(link)}">{escape(link)}</a></p>')
        else:
            out.append(f"<p>See {escape(link)}</p>")
    return out + ["</div>"]


def _smoke(report: Report) -> list[str]:
    runs = report.smoke_runs
    if not runs:
        return []
    out = ["<h2>Smoke trainings</h2>"]
    if any(r.simulated for r in runs):
        out.append(f'<p class="note">{escape(SIMULATED_LINE)}</p>')
    out.append(table(SMOKE_HEADERS, smoke_rows(runs)))
    charts = all_charts(runs)
    for key, heading in GROUPS:
        group = [c for c in charts if c.group == key]
        if group:
            out.append(f"<h3>{escape(heading)}</h3>")
            out += [f"<figure>{render_svg(c)}</figure>" for c in group]
    return out


def _checks(report: Report) -> list[str]:
    out = ["<h2>Checks</h2>"]
    for outcome in report.checks:
        out += _check(outcome)
    return out


def _check(outcome: CheckOutcome) -> list[str]:
    status = outcome.status.value
    problem = outcome.status in (CheckStatus.WARNING, CheckStatus.FAILED, CheckStatus.CRASHED)
    opened = " open" if problem else ""
    out = [f"<details{opened}><summary>"
           f'<span class="badge {escape(status)}">{escape(status)}</span> {escape(outcome.title)} '
           f"<code>{escape(outcome.name)}</code></summary>"]
    if outcome.skip_reason:
        out.append(f"<p>Skipped: {escape(outcome.skip_reason)}</p>")
    for f in outcome.findings:
        out += finding_html(f)
    return out + ["</details>"]


def _tables(report: Report) -> list[str]:
    out = []
    if report.libraries is not None:  # `libs`: its table as the terminal shows it
        out += ["<h2>CUDA libraries</h2>",
                f"<pre>{escape(chr(10).join(libraries_lines(report.libraries, report.source)))}</pre>"]
    devices = device_table_rows(report)
    if devices:
        out += ["<h2>GPUs</h2>", table(list(DEVICE_HEADERS.values()),
                                       [[row[k] for k in DEVICE_HEADERS] for row in devices])]
    if report.fleet is not None:
        out += ["<h2>Differences between nodes</h2>", f"<p>{escape(fleet_heading(report))}</p>"]
        differences = fleet_difference_rows(report)
        if differences:
            out.append(table(FLEET_HEADERS, differences))
    return out


def table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"
