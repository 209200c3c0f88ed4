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


# How many entries a "needs a TensorFlow version" finding names before "... and N more".
SHOWN_UNDECIDED = 15


def needs_tensorflow(a: Assessment, env: Environment) -> bool:
    """An entry not reported only because no TensorFlow version is known (a Keras-only query):
    it names a TensorFlow range, nothing known contradicts it, something known agrees, and the
    TensorFlow version is the only fact it lacks."""
    if a.verdict is not Verdict.CANNOT_TELL or worth_reporting(a) or not a.agrees:
        return False
    if "tensorflow" not in a.issue.affects or "tensorflow" in env.versions or "tensorflow" in env.ranges:
        return False
    return all(line.startswith("tensorflow ") for line in a.unknown)


def undecided_finding(undecided: list[Assessment]) -> Finding:
    """One line for the entries a TensorFlow version would decide, naming each."""
    shown = [f"{a.issue.id}: tensorflow {a.issue.affects['tensorflow']}" for a in undecided[:SHOWN_UNDECIDED]]
    more = len(undecided) - len(shown)
    return Finding(
        "matrix.needs-version", Severity.INFO,
        f"Cannot tell whether {len(undecided)} known issue(s) apply without a TensorFlow version",
        shown + ([f"... and {more} more"] if more > 0 else []),
        fix="Name the TensorFlow version too (tensorflow==X.Y.Z) to decide these entries.",
    )


def known_issue_findings(
    issues: tuple[KnownIssue, ...] | list[KnownIssue], env: Environment
) -> list[Finding]:
    """The findings of every entry worth reporting, most severe first (stable order otherwise),
    then one line naming the entries that only a TensorFlow version would decide."""
    assessments = [assess(i, env) for i in issues]
    found = [finding_for(a) for a in assessments if worth_reporting(a)]
    undecided = [a for a in assessments if needs_tensorflow(a, env)]
    return sorted(found, key=lambda f: f.severity, reverse=True) + (
        [undecided_finding(undecided)] if undecided else [])
