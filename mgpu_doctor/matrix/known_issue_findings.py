"""Known-issue assessments as findings: which are worth a line, and at which severity."""

from __future__ import annotations

from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import KnownIssue
from mgpu_doctor.matrix.match import Assessment, Verdict, assess
from mgpu_doctor.model.findings import Finding, Severity


def worth_reporting(a: Assessment) -> bool:
    """Matches, or cannot tell while a version it names is known and agrees (an entry that names
    no version: while something known agrees). Two GPUs alone do not make an NCCL entry worth a
    line when the NCCL version is not known: that is noise on every multi-GPU query."""
    if a.verdict is Verdict.MATCHES:
        return True
    if a.verdict is not Verdict.CANNOT_TELL:
        return False
    return a.version_agrees if a.issue.affects else bool(a.agrees)


def finding_for(a: Assessment) -> Finding:
    """A finding for an assessment worth reporting (see :func:`worth_reporting`)."""
    issue = a.issue
    conditional = bool(a.usage_unknown)
    if a.verdict is Verdict.CANNOT_TELL:
        severity, prefix = Severity.INFO, "Cannot tell whether this known issue applies: "
    elif conditional:
        severity, prefix = Severity.INFO, "Known issue for these versions: "
    elif issue.symptom == "slow":
        severity, prefix = Severity.INFO, "Known issue applies (slowdown): "
    else:
        severity, prefix = Severity.WARNING, "Known issue applies: "
    evidence = [f"matches: {line}" for line in a.agrees]
    evidence += [f"not known: {line}" for line in a.unknown]
    evidence += [f"applies {line}" for line in a.usage_unknown]
    evidence.append(f"symptom: {issue.symptom}; confidence: {issue.confidence}"
                    + (f"; fixed in {issue.fixed_in}" if issue.fixed_in else ""))
    evidence += [f"source: {s.title or s.kind} ({s.ref})" for s in issue.sources if not s.url and s.ref]
    return Finding(
        code=f"known-issue.{issue.id}",
        severity=severity,
        title=prefix + issue.title,
        evidence=evidence,
        fix=issue.workaround,
        links=[s.url for s in issue.sources if s.url],
    )


def known_issue_findings(
    issues: tuple[KnownIssue, ...] | list[KnownIssue], env: Environment
) -> list[Finding]:
    """The findings of every entry worth reporting, most severe first (stable order otherwise)."""
    found = [finding_for(a) for a in (assess(i, env) for i in issues) if worth_reporting(a)]
    return sorted(found, key=lambda f: f.severity, reverse=True)
