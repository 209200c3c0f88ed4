"""What a text's failure lines say, as findings: the known issues whose signatures they match
(ahead of any match by versions alone), and each failure no signature names, in its own words.

Pure: texts come in as evidence lines, the matrix as entries, the environment as an Environment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import KnownIssue
from mgpu_doctor.matrix.match import Verdict, assess
from mgpu_doctor.matrix.mechanisms import mechanism_of
from mgpu_doctor.matrix.signatures import SignatureHit, normalised, pieces_in, signature_hits
from mgpu_doctor.model.evidence import EvidenceLine, Failure, failures
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.record import record

UNKNOWN_ERROR = "matrix.unknown-error"
REPORT_COMMAND = "mgpu-doctor report -o mgpu-report.md"
SHOWN_FAILURES = 3  # distinct failures of one text named, the last ones (a log ends on its cause)


@record
class GivenText:
    """Lines of one text the doctor holds, and how findings name it ("the pasted text")."""

    origin: str
    lines: Sequence[EvidenceLine]


def evidence_findings(issues: Sequence[KnownIssue], env: Environment,
                      texts: Sequence[GivenText]) -> list[Finding]:
    """Known issues named by a matching line, most severe first; then, per text, its failures that
    no named issue's line covers."""
    named: dict[str, Finding] = {}
    covered: set[tuple[str, int, str]] = set()
    for text in texts:
        for hit in signature_hits(issues, text.lines, text.origin):
            finding = signature_finding(hit, env)
            if finding is None:
                continue
            named.setdefault(hit.issue.id, finding)
            if finding.severity >= Severity.WARNING:  # "a possible cause" leaves the error standing
                covered.add((text.origin, hit.line.line, hit.line.text))
    found = sorted(named.values(), key=lambda f: f.severity, reverse=True)
    for text in texts:
        left = [f for f in failures_and_mechanisms(text.lines)
                if (text.origin, f.line.line, f.line.text) not in covered
                and not _covered_by(f, named, issues)]
        found += [unknown_error_finding(f, text.origin) for f in _distinct(left)[-SHOWN_FAILURES:]]
    return found


# Words that make a line naming a mechanism a failure, not a sentence about one ("it does not run
# out of memory"); "requires being in": tf.distribute's context error quoted without its exception;
# "killed process", "oom-kill": the kernel's OOM killer.
_FAILED = re.compile(r"(?i)error|fail|warn|abort|exhausted|refused|cancelled|insufficient|requires being in"
                     r"|killed process|kill process|oom-kill|oom_reaper")


def failures_and_mechanisms(lines: Sequence[EvidenceLine]) -> list[Failure]:
    """The failure lines, and the lines that name a known mechanism failing (an issue's title
    "ncclCommInitRank failed: unhandled system error", an NCCL WARN line), in text order."""
    found = failures(list(lines))
    taken = {f.line.line for f in found}
    for line in lines:
        mechanism = mechanism_of(line.text) if line.line not in taken and _FAILED.search(line.text) else None
        if mechanism is not None and mechanism.alone:
            found.append(Failure(line))
    return sorted(found, key=lambda f: f.line.line)


def _source_name(issue: KnownIssue, source: str) -> str:
    """A signature's source as a reader knows it: a thread by its address, a write-up (no address)
    by its title, not by the file and section that hold it."""
    for s in issue.sources:
        if not s.url and s.ref == source and s.title:
            return s.title
    return source


def signature_finding(hit: SignatureHit, env: Environment) -> Finding | None:
    """A known issue a line names. A line many causes print names the entry only where nothing
    known contradicts it, and then as one possible cause."""
    issue, signature = hit.issue, hit.signature
    a = assess(issue, env)
    if not signature.identifies and a.verdict is Verdict.NO_MATCH:
        return None
    evidence = [f"{hit.where}: {hit.line.text}",
                f"the line it prints (from {_source_name(issue, signature.source)}): {signature.text}"]
    if a.verdict is Verdict.MATCHES:
        evidence += [f"matches: {line}" for line in a.agrees]
        evidence += [f"applies {line}" for line in a.usage_unknown]
    elif a.verdict is Verdict.NO_MATCH:
        evidence += [f"outside what its sources report: {line}" for line in a.disagrees]
        evidence.append("the line names this cause all the same: it is still there, or back")
    else:
        evidence += [f"matches: {line}" for line in a.agrees]
        evidence += [f"not known: {line}" for line in a.unknown]
        if a.unreported is not None and signature.identifies:  # past its last report, no fix known
            evidence.append("the line names this cause all the same: its versions are past what its sources "
                            "report")
    evidence.append(f"symptom: {issue.symptom}; confidence: {issue.confidence}"
                    + (f"; fixed in {issue.fixed_in}" if issue.fixed_in else ""))
    if signature.identifies:
        severity, title = Severity.WARNING, f"Known issue shown by {hit.where}: {issue.title}"
    else:
        fits = a.verdict is Verdict.MATCHES and not a.usage_unknown
        severity = Severity.WARNING if fits else Severity.INFO
        title = f"A possible cause of {hit.where} (many causes print that line): {issue.title}"
    return Finding(code=f"known-issue.{issue.id}", severity=severity, title=title, evidence=evidence,
                   fix=issue.workaround, links=[s.url for s in issue.sources if s.url])


def unknown_error_finding(failure: Failure, origin: str) -> Finding:
    """A failure no known issue's line names, in its own words, with the user's code it came from."""
    where = f"{origin}, line {failure.line.line}" if failure.line.line else origin
    evidence = [f"{where}: {failure.line.text}"]
    if failure.frame_text:
        evidence.append(f"your code: {failure.frame_text}")
    mechanism = mechanism_of(failure.line.text)
    if mechanism is not None:
        evidence.append(f"what the line means: {mechanism.what}")
        fix = f"General advice (no known issue names this line): {mechanism.fix}"
    elif failure.crash:
        fix = ("The process crashed in native code (TensorFlow, CUDA, a driver), and no known issue prints "
               "this line: the log lines just before it usually name what failed. If it only happens on "
               f"several GPUs, `{REPORT_COMMAND}` holds what an issue needs.")
    else:
        under = f" (raised under {failure.frame_text})" if failure.frame_text else ""
        fix = (f"No known multi-GPU issue prints this line: read it as an error of the training code{under}. "
               f"If it happens only on several GPUs, `{REPORT_COMMAND}` holds what an issue needs.")
    return Finding(UNKNOWN_ERROR, Severity.WARNING,
                   f"{origin[:1].upper()}{origin[1:]} shows an error no known issue names: "
                   f"{_cut(failure.line.text)}",
                   evidence, fix=fix, links=list(mechanism.links) if mechanism is not None else [])


def _covered_by(failure: Failure, named: dict[str, Finding], issues: Sequence[KnownIssue]) -> bool:
    """Whether a named entry's signature matches this failure line too (another line matched first)."""
    text = normalised(failure.line.text)
    sure = {i for i, f in named.items() if f.severity >= Severity.WARNING}
    return any(pieces_in(p, text) for i in issues if i.id in sure for s in i.signatures for p in s.forms)


def _distinct(found: list[Failure]) -> list[Failure]:
    seen: set[str] = set()
    out = []
    for f in found:
        if f.line.text not in seen:
            seen.add(f.line.text)
            out.append(f)
    return out


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
