"""The support bug report (`mgpu-doctor report`): one Markdown file to paste into an issue.

Summary, findings with fixes, smoke results, matched known issues, environment tables, and the
whole report as JSON in a collapsed block that `mgpu-doctor check --from FILE` reads back.
"""

from __future__ import annotations

from typing import Any

from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.markdown_json_block import MARKER, json_block
from mgpu_doctor.model.report import Report
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.common import (
    DEVICE_HEADERS,
    device_table_rows,
    summary_counts,
    summary_line,
)
from mgpu_doctor.renderers.markdown import (
    STATUS_WORDS,
    cell,
    check_details,
    code,
    conditional_markdown,
    drift_markdown,
    finding_lines,
    text,
    training_markdown,
)
from mgpu_doctor.renderers.mermaid import pictures_markdown
from mgpu_doctor.renderers.smoke_table import SIMULATED_LINE, SMOKE_HEADERS, smoke_rows
from mgpu_doctor.renderers.tables import table

KNOWN_ISSUES_CHECK = "known-issues"
PROBLEM_STATUSES = (CheckStatus.WARNING, CheckStatus.FAILED, CheckStatus.CRASHED)
# GitHub refuses issue bodies over 65536 characters.
GITHUB_BODY_LIMIT = 65536


def render(report: Report, options: RenderOptions, *, redacted: bool = True) -> str:
    out = [f"# mgpu-doctor report: {verdict(report)}",
           f"{MARKER} schema_version={report.schema_version}: the JSON block at the end is what "
           "`mgpu-doctor check --from THIS_FILE` reads -->", ""]
    snap = report.snapshot
    if snap is None:  # a `matrix query` or a `fleet` report describes no single machine
        raise ValueError(f"a support report needs one machine's facts, not a {report.command} report")
    out += [f"mgpu-doctor {text(report.tool_version)}, facts gathered {text(snap.created)} from "
            f"{text(report.source)}"
            + (f", level {report.level}" if report.level else "")
            + (" (quick: TensorFlow not imported)" if report.quick else "")
            + ("; hostname, user, home directory and GPU UUIDs redacted" if redacted
               else "; NOT redacted"), "", f"**{text(summary_line(report))}**", ""]
    out += drift_markdown(report)
    out += training_markdown(report)
    out += _findings(report, options)
    out += smoke_section(report)
    out += pictures_markdown(report.smoke_runs, "###")
    out += _known_issues(report)
    out += _environment(report)
    out += ["## Checks", "", table([[code(c.name), cell(c.title), STATUS_WORDS[c.status],
                                      cell(c.skip_reason or check_details(c))]
                                     for c in report.checks], ["Check", "What", "Status", "Details"],
                                    "github"), ""]
    data = to_jsonable(report)
    out += json_block(data)
    body = "\n".join(out) + "\n"
    if len(body) > GITHUB_BODY_LIMIT:
        note = (f"> This report is {len(body)} characters, more than a GitHub issue body takes "
                f"({GITHUB_BODY_LIMIT}): attach the file instead of pasting it.")
        body = body.replace("\n\n", f"\n\n{note}\n\n", 1)
    return body


def smoke_section(report: Report) -> list[str]:
    """One row per smoke training; what went wrong is in the findings above."""
    out = ["## Smoke trainings", ""]
    runs = report.smoke_runs
    if not runs:
        why = " (`--quick`)" if report.quick else ""
        return out + [f"_No smoke training results in this report{why}._", ""]
    if any(r.simulated for r in runs):
        out += [f"_{SIMULATED_LINE}_", ""]
    return out + [_table(smoke_rows(runs), SMOKE_HEADERS), ""]


def verdict(report: Report) -> str:
    """The report's title: the checks with problems, counted as the summary line counts them."""
    worst = report.worst
    if worst <= Severity.INFO:
        return "no problems found"
    counts = summary_counts(report)
    bad = {status: counts[status.value] for status in PROBLEM_STATUSES if counts[status.value]}
    parts = ", ".join(f"{n} {status.value}" for status, n in bad.items())
    return f"{sum(bad.values())} check(s) with problems ({parts}), worst: {worst.value}"


def _findings(report: Report, options: RenderOptions) -> list[str]:
    # The matrix's own problems are listed with the known issues.
    problems = [f for f in report.findings if f.severity >= Severity.WARNING
                and not f.code.startswith("matrix.")]
    out = ["## Findings", ""]
    if not problems:
        return out + ["No warnings or errors.", ""]
    for f in sorted(problems, key=lambda f: f.severity, reverse=True):
        out += finding_lines(f)
    return out


def _known_issues(report: Report) -> list[str]:
    out = ["## Known issues", ""]
    outcome = next((c for c in report.checks if c.name == KNOWN_ISSUES_CHECK), None)
    if outcome is None:
        return out + ["_The known-issues check did not run._", ""]
    if outcome.skip_reason:
        return out + [f"_Not checked: {text(outcome.skip_reason)}_", ""]
    matched = [f for f in outcome.findings if f.severity > Severity.OK and f.condition is None]
    conditional = conditional_markdown(outcome.findings, verbose=False, heading="###")
    if not matched and not conditional:
        return out + ["No known issue matches this environment.", ""]
    for f in matched:
        out += finding_lines(f)
    return out + conditional


def _environment(report: Report) -> list[str]:
    snap = report.snapshot
    assert snap is not None  # render() refuses reports without one
    host = snap.host
    out = ["## Environment", "", "### Host", "", _table([
        ["Hostname", host.hostname], ["OS", _v(host.os_release)], ["Kernel", host.kernel],
        ["Machine", host.machine], ["libc", _v(host.libc)], ["CPUs", str(host.cpu_count)],
        ["Memory", _bytes(host.memory_total_bytes)],
        ["Container", ", ".join(host.container_hints) or "none detected"],
    ], ["", ""]), ""]
    py = snap.python
    out += ["### Python", ""]
    out += [_table([["Executable", py.executable], ["Version", f"{py.implementation} {py.version}"],
                    ["Prefix", py.prefix]], ["", ""])
            if not isinstance(py, Unavailable) else f"_{text(str(py))}_", ""]
    pkgs = snap.packages
    out += ["### Packages", ""]
    out += [_table(sorted([k, v] for k, v in pkgs.versions.items()), ["Package", "Version"])
            if not isinstance(pkgs, Unavailable) else f"_{text(str(pkgs))}_", ""]
    nvml = snap.nvml
    out += ["### NVIDIA driver and GPUs", ""]
    if isinstance(nvml, Unavailable):
        out += [f"_NVML {text(str(nvml))}_", ""]
    else:
        out += [text(f"Driver {nvml.driver_version}, CUDA driver API {_v(nvml.cuda_driver_version)}, "
                     f"NVML {_v(nvml.nvml_version)}"), ""]
        rows = device_table_rows(report)
        if rows:
            out += [_table([[r[k] for k in DEVICE_HEADERS] for r in rows], list(DEVICE_HEADERS.values())), ""]
    tf = snap.tensorflow
    out += ["### TensorFlow", ""]
    if isinstance(tf, Unavailable):
        out += [f"_TensorFlow {text(str(tf))}_", ""]
    else:
        out += [_table([
            ["Version", tf.version], ["Keras", f"{_v(tf.keras_module)} {_v(tf.keras_version)}"],
            ["Built with CUDA", _v(tf.built_with_cuda)],
            ["CUDA / cuDNN (build)", f"{tf.build_info.get('cuda_version', '-')} / "
                                     f"{tf.build_info.get('cudnn_version', '-')}"],
            ["Import time", f"{tf.import_seconds:.1f} s"],
        ], ["", ""]), ""]
    out += ["### Environment variables (allow-listed)", ""]
    out += [table([[_code_cell(k), _code_cell(v)] for k, v in sorted(snap.env.items())],
                  ["Variable", "Value"], "github") if snap.env else "_none set_", ""]
    return out


def _table(rows: list[list[str]], headers: list[str]) -> str:
    cells = [[_cell(c) for c in row] for row in rows]
    return table(cells, headers, "github")


def _cell(value: Any) -> str:
    return cell(str(value))


def _code_cell(value: str) -> str:
    # HTML is inert in inline code; a bar still ends the cell, a line break the row.
    return code(value.replace("\n", " ")).replace("|", "\\|")


def _v(value: Any) -> str:
    return f"({value})" if isinstance(value, Unavailable) else str(value)


def _bytes(value: int | Unavailable) -> str:
    return _v(value) if isinstance(value, Unavailable) else f"{value / 2**30:.1f} GiB"

