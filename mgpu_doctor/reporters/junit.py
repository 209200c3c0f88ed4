"""JUnit XML: one testcase per check, for Jenkins, GitLab and GitHub test reports."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from mgpu_doctor.findings import CheckStatus, Severity
from mgpu_doctor.report import Report
from mgpu_doctor.reporters import RenderOptions


def render(report: Report, options: RenderOptions) -> str:
    suite = ET.Element("testsuite", name="mgpu-doctor", tests=str(len(report.checks)))
    failures = errors = skipped = 0
    for outcome in report.checks:
        case = ET.SubElement(suite, "testcase", classname="mgpu_doctor.check", name=outcome.name)
        bad = [f for f in outcome.findings if f.severity >= options.fail_on]
        if outcome.status is CheckStatus.SKIPPED:
            skipped += 1
            ET.SubElement(case, "skipped", message=outcome.skip_reason)
        elif outcome.status is CheckStatus.CRASHED:
            errors += 1
            crash = outcome.findings[0]
            el = ET.SubElement(case, "error", message=crash.title, type=crash.code)
            el.text = "\n".join(crash.evidence)
        elif bad:
            failures += 1
            worst = max(bad, key=lambda f: f.severity)
            el = ET.SubElement(case, "failure", message=_message(worst.title, worst.fix),
                               type=worst.code)
            el.text = "\n\n".join(
                "\n".join([f"[{f.severity.value}] {f.title}", *f.evidence,
                           f"fix: {f.fix}" if f.fix else ""]).strip() for f in bad
            )
        notes = [f"[{f.severity.value}] {f.title}" for f in outcome.findings
                 if Severity.OK < f.severity < options.fail_on]
        if notes:
            ET.SubElement(case, "system-out").text = "\n".join(notes)
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _message(title: str, fix: str) -> str:
    return f"{title}. Fix: {fix}" if fix else title
