"""The terminal report, doctor style: checks grouped in sections, one line per check, details and
fix indented below."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, TypeVar

from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Section, Severity, condition_groups
from mgpu_doctor.model.redact import map_strings
from mgpu_doctor.model.report import Report
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.common import (
    DEVICE_HEADERS,
    FLEET_HEADERS,
    acknowledgement_line,
    condition_head,
    condition_keys,
    device_table_rows,
    fleet_difference_rows,
    fleet_heading,
    group_line,
    printable,
    summary_line,
    training_line,
)
from mgpu_doctor.renderers.tables import table

if TYPE_CHECKING:
    from mgpu_doctor.model.libraries import LibrariesView

GLYPHS = {
    CheckStatus.PASSED: ("✓", "+"), CheckStatus.INFO: ("i", "i"),
    CheckStatus.WARNING: ("!", "!"), CheckStatus.FAILED: ("✗", "x"),
    CheckStatus.SKIPPED: ("-", "-"), CheckStatus.CRASHED: ("✗", "X"),
}
SEVERITY_GLYPHS = {
    Severity.OK: ("✓", "+"), Severity.INFO: ("i", "i"), Severity.WARNING: ("!", "!"),
    Severity.ERROR: ("✗", "x"), Severity.CRASH: ("✗", "X"),
}
COLORS = {
    CheckStatus.PASSED: "32", CheckStatus.INFO: "36", CheckStatus.WARNING: "33",
    CheckStatus.FAILED: "31", CheckStatus.SKIPPED: "2", CheckStatus.CRASHED: "35",
}
WIDTH = 100
T = TypeVar("T")


def render(report: Report, options: RenderOptions) -> str:
    report = _printable(report)  # the one place: every value drawn below is terminal-safe
    out = [_header(report)]
    if report.training is not None and (options.verbose or not report.training.empty):
        out += _wrap(training_line(report.training), 0, hanging=4)
    out.append("")
    if report.libraries is not None:
        out += libraries_lines(report.libraries, report.source) + [""]
    out += _sections(report.checks, options)
    rows = device_table_rows(report)
    if rows:
        out += ["", "GPUs (NVML index, CUDA ordinal, TensorFlow device):"]
        devices = table([[r[k] for k in DEVICE_HEADERS] for r in rows], list(DEVICE_HEADERS.values()))
        out += ["  " + line for line in devices.splitlines()]
    if report.fleet is not None:
        out += ["", fleet_heading(report)]
        differences = fleet_difference_rows(report, max_nodes=8)
        if differences:
            table_text = table(differences, FLEET_HEADERS, maxcolwidths=[30, 40, 40])
            out += ["  " + line for line in table_text.splitlines()]
    out += ["", summary_line(report)]
    if report.quick:
        out.append("Quick check: TensorFlow was not imported. Run `mgpu-doctor check` for "
                   "everything.")
    for note in report.notes:
        out.append(note)
    if not options.verbose and any(f.severity is Severity.INFO for f in report.findings):
        conditional = sum(1 for f in report.findings if f.condition is not None and f.condition.training)
        if conditional and report.training is not None and report.training.empty:
            out.append(f"Run with -v for the details. Training undeclared: --strategy, --usage, ... decide "
                       f"{conditional} known issues.")
        else:
            out.append("Run with -v for the informational details.")
    text = "\n".join(out) + "\n"
    return text if options.unicode else to_ascii(text)


def libraries_lines(view: LibrariesView, source: str) -> list[str]:
    """The `libs` table: built for, in use, found how, driver support; then every copy found."""
    view, source = _printable(view), printable(source)
    out = [f"CUDA libraries on {source}"]
    out.append(f"TensorFlow built for: CUDA {view.built_cuda}, cuDNN {view.built_cudnn} ({view.built_source})"
               if view.built_cuda else f"TensorFlow built for: unknown ({view.built_unknown})")
    driver = view.driver
    if driver.driver:
        out.append(f"Driver: {driver.driver}, supports CUDA up to {driver.cuda}"
                   + (f" (full support up to CUDA {driver.full_support_up_to})" if driver.full_support_up_to
                      else ""))
    else:
        out.append(f"Driver: unknown ({driver.note})")
    if not view.versions_loaded:
        out.append("Versions from file names and metadata only (nothing was loaded: --quick, or the "
                   "diagnosed Python does not work).")
    out.append("")
    rows = [[r.name, r.built_for or "-",
             (f"{r.in_use_version or '?'}  {r.in_use}" if r.in_use else "not found"),
             r.found_how or "-", r.driver_supports or "-"]
            for r in view.rows if r.copies or r.built_for]
    out += table(rows, ["Library", "Built for", "In use", "Found how", "Driver supports"]).splitlines()
    out += ["", "Every copy found, in search order (* = the loader's first pick for its soname):"]
    for r in view.rows:
        if not r.copies:
            continue
        out.append(f"  {r.name}" + (f" (TensorFlow opens {r.soname})" if r.soname else ""))
        for c in r.copies:
            mark = "*" if c.wins else " "
            source_note = f" ({c.version_source})" if c.version_source else ""
            out.append(f"    {mark} {c.path}  {c.version or '?'}{source_note}  [{c.why}]")
    if view.toolkits:
        out += ["", "CUDA toolkits:"]
        for kit in view.toolkits:
            version = kit.version if isinstance(kit.version, str) else f"unknown ({kit.version.detail})"
            out.append(f"  {kit.path}  {version}  [{kit.found_by}]")
    return out


ASCII_FALLBACKS = str.maketrans({"…": "...", "×": "x", "°": "deg", "→": "->", "✓": "+", "✗": "x",
                                 "‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-"})


def to_ascii(text: str) -> str:
    """Plain output off a terminal: known symbols spelled out, anything else as '?'."""
    return text.translate(ASCII_FALLBACKS).encode("ascii", "replace").decode("ascii")


def _printable(value: T) -> T:
    """Every string of a report (or view) with its control characters written out (see printable)."""
    return map_strings(value, printable, keep=frozenset())


def _sections(checks: list[CheckOutcome], options: RenderOptions) -> list[str]:
    """The checks under their section headings (in the order of ``Section``), as `flutter doctor`
    groups its validators; checks of no section (a fleet, a smoke run) come first, unheaded."""
    out = _outcome_lines([c for c in checks if c.section is None], options)
    for section in Section:
        members = [c for c in checks if c.section is section]
        if members:
            heading = f"\x1b[1m{section.title}\x1b[0m" if options.color else section.title
            out += ([""] if out else []) + [heading] + _outcome_lines(members, options)
    return out


def _outcome_lines(checks: list[CheckOutcome], options: RenderOptions) -> list[str]:
    out: list[str] = []
    for group in _group_skips(checks, options.verbose):
        if len(group) == 1:
            out.extend(_check_lines(group[0], options))
        else:
            glyph = _paint(GLYPHS[CheckStatus.SKIPPED][0 if options.unicode else 1],
                           CheckStatus.SKIPPED, options)
            out += _wrap(f"[{glyph}] {len(group)} checks skipped ({group[0].skip_reason}): "
                         + ", ".join(o.name for o in group), 0, hanging=4)
    return out


def _group_skips(checks: list[CheckOutcome], verbose: bool) -> list[list[CheckOutcome]]:
    """Consecutive checks skipped for the same reason share one line (each one with -v)."""
    groups: list[list[CheckOutcome]] = []
    for outcome in checks:
        last = groups[-1] if groups else None
        if (
            not verbose and last is not None
            and outcome.status is CheckStatus.SKIPPED and last[0].status is CheckStatus.SKIPPED
            and outcome.skip_reason == last[0].skip_reason
        ):
            last.append(outcome)
        else:
            groups.append([outcome])
    return groups


def _header(report: Report) -> str:
    if report.fleet is not None:
        return f"mgpu-doctor {report.tool_version}: {report.source} ({', '.join(report.fleet.node_names)})"
    snap = report.snapshot
    if snap is None:
        return f"mgpu-doctor {report.tool_version}: {report.source}"
    python = snap.python
    who = (f"{python.executable} (Python {python.version})"
           if not isinstance(python, Unavailable) else "Python unknown")
    level = f", level {report.level}" if report.level else ""
    return f"mgpu-doctor {report.tool_version}: {report.source}, {who}{level}"


def _check_lines(outcome: CheckOutcome, options: RenderOptions) -> list[str]:
    glyph = _paint(GLYPHS[outcome.status][0 if options.unicode else 1], outcome.status, options)
    headline = outcome.title
    ok_titles = [f.title for f in outcome.findings if f.severity is Severity.OK]
    if outcome.status is CheckStatus.SKIPPED:
        headline += f" (skipped: {outcome.skip_reason})"
    elif ok_titles:
        headline += f": {ok_titles[0]}"
    lines = [f"[{glyph}] {headline}"]
    for finding in outcome.findings:
        if finding.condition is not None:
            continue  # grouped below, by the fact that would decide it
        if finding.severity is Severity.OK:
            if options.verbose:
                lines += _indent(finding.evidence, 4)
            continue
        if finding.severity is Severity.INFO and not options.verbose:
            lines += _wrap(f"{_sev_glyph(finding, options)} {finding.title}", 4)
            continue
        lines.extend(_finding_lines(finding, options))
    return lines + _condition_lines(outcome, options)


def _condition_lines(outcome: CheckOutcome, options: RenderOptions) -> list[str]:
    """The conditional findings: one line per fact that would decide them (the values it takes
    cut to the width), and with -v each value's line followed by its findings in full."""
    groups = condition_groups(outcome.findings)
    more = any(f.condition is None and f.severity > Severity.OK for f in outcome.findings)
    lines: list[str] = []
    glyph = SEVERITY_GLYPHS[Severity.INFO][0 if options.unicode else 1]
    for key, members in condition_keys(groups):
        head, values = condition_head(key, members, more)
        if options.verbose:
            lines += _wrap(f"{glyph} {head} {', '.join(values)}", 4)
            for g in members:
                lines += _wrap(group_line(g), 6)
                for finding in g.findings:
                    lines.extend("    " + line for line in _finding_lines(finding, options))
            continue
        lines.append(_fitted(f"    {glyph} {head}", values))
    return lines


def _fitted(head: str, values: list[str]) -> str:
    """``head`` and as many of ``values`` as fit in the width, then how many more (-v shows all)."""
    for shown in range(len(values), 0, -1):
        rest = len(values) - shown
        line = f"{head} {', '.join(values[:shown])}" + (f", +{rest} more (-v)" if rest else "")
        if len(line) <= WIDTH or shown == 1:
            return line
    return head


def _finding_lines(finding: Finding, options: RenderOptions) -> list[str]:
    lines = _wrap(f"{_sev_glyph(finding, options)} {finding.title}", 4)
    if finding.acknowledgement is not None:
        lines += _wrap(acknowledgement_line(finding), 6)
    lines += _indent(finding.evidence, 6)
    if finding.fix:
        arrow = "→" if options.unicode else "->"
        lines += _wrap(f"{arrow} {finding.fix}", 6, hanging=2 + len(arrow) - 1)
    for link in finding.links:
        lines.append(f"      see {link}")
    return lines


def _sev_glyph(finding: Finding, options: RenderOptions) -> str:
    return SEVERITY_GLYPHS[finding.severity][0 if options.unicode else 1]


def _indent(lines: list[str], n: int) -> list[str]:
    out = []
    for line in lines:
        for part in line.splitlines() or [""]:
            out.append(" " * n + part)
    return out


def _wrap(text: str, indent: int, hanging: int = 2) -> list[str]:
    return textwrap.wrap(
        text, width=WIDTH, initial_indent=" " * indent,
        subsequent_indent=" " * (indent + hanging), break_on_hyphens=False,
        break_long_words=False,
    ) or [" " * indent]


def _paint(text: str, status: CheckStatus, options: RenderOptions) -> str:
    if not options.color:
        return text
    return f"\x1b[{COLORS[status]}m{text}\x1b[0m"
