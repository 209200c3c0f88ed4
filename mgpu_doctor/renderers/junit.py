"""JUnit XML: one testcase per check, for Jenkins, GitLab and GitHub test reports.

What the readers use: Jenkins' JUnit plugin reads testsuite/testcase ``name``, ``classname``,
``time``, failure/error ``message`` and ``type`` and the element text as details, ``skipped``
and ``system-out``; GitLab shows the failure/error/skipped element *text* as the details and
ignores the message attribute, so the text repeats title, evidence and fix.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from mgpu_doctor.model.findings import CheckStatus, Finding, Severity
from mgpu_doctor.model.report import Report
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.common import acknowledgement_line


def render(report: Report, options: RenderOptions) -> str:
    suite = ET.Element("testsuite", name="mgpu-doctor", tests=str(len(report.checks)))
    failures = errors = skipped = 0
    for outcome in report.checks:
        # Checks are pure functions of a snapshot: their run time is nil, not unknown.
        case = ET.SubElement(suite, "testcase", classname="mgpu_doctor.check", name=outcome.name,
                             time="0")
        bad = [f for f in outcome.findings if f.severity >= options.fail_on and f.gating]
        if outcome.status is CheckStatus.SKIPPED:
            skipped += 1
            el = ET.SubElement(case, "skipped", message=outcome.skip_reason)
            el.text = outcome.skip_reason
        elif outcome.status is CheckStatus.CRASHED:
            errors += 1
            crash = outcome.findings[0]
            el = ET.SubElement(case, "error", message=_message(crash.title, crash.fix), type=crash.code)
            el.text = _details(crash)
        elif bad:
            failures += 1
            worst = max(bad, key=lambda f: f.severity)
            el = ET.SubElement(case, "failure", message=_message(worst.title, worst.fix),
                               type=worst.code)
            el.text = "\n\n".join(_details(f) for f in bad)
        notes = [f"[{f.severity.value}] {f.title}" + (f" ({acknowledgement_line(f)})"
                                                       if f.acknowledgement else "")
                 for f in outcome.findings
                 if f.severity > Severity.OK and f not in bad and outcome.status is not CheckStatus.CRASHED]
        if notes:
            ET.SubElement(case, "system-out").text = "\n".join(notes)
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    suite.set("time", "0")
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _details(f: Finding) -> str:
    lines = [f"[{f.severity.value}] {f.title}", *f.evidence]
    if f.fix:
        lines.append(f"fix: {f.fix}")
    if f.acknowledgement is not None:
        lines.append(acknowledgement_line(f))
    return "\n".join(lines)


def _message(title: str, fix: str) -> str:
    return f"{title.rstrip('.')}. Fix: {fix}" if fix else title
