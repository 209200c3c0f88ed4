"""The `known-issues` check: which known hangs, leaks and incompatibilities apply here."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.environment.matrix_view import environment_from_resolved
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.matrix import known_issue_findings as known_issue_findings_module
from mgpu_doctor.matrix import match
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.index import MatrixIndex, load_index
from mgpu_doctor.matrix.known_issue_findings import known_issue_findings, older_lines
from mgpu_doctor.matrix.match import assess
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot

if TYPE_CHECKING:
    from mgpu_doctor.matrix.evidence_findings import GivenText

# Lazy: `evidence_findings` (and the signatures and mechanisms it reads) is imported only where a
# text was given (a paste, `--log`); a check of this machine's versions never needs it.

NAME = "known-issues"
TITLE = "Known multi-GPU issues for these versions"
CODES = ("known-issue.ID", "matrix.no-known-issue", "matrix.problems", "matrix.needs-version",
         "matrix.reported-older", "matrix.unknown-error")  # evidence_findings.UNKNOWN_ERROR


def matrix_findings(matrix: MatrixIndex) -> list[Finding]:
    """A warning for unusable matrix files: the rest of the matrix is still used."""
    if not matrix.problems:
        return []
    return [Finding(
        "matrix.problems", Severity.WARNING,
        f"{len(matrix.problems)} problem(s) in the matrix files: those entries were not used",
        [str(p) for p in matrix.problems[:20]]
        + ([f"... and {len(matrix.problems) - 20} more"] if len(matrix.problems) > 20 else []),
        fix="Fix the files (`mgpu-doctor matrix validate DIR` lists every problem); every "
        "other entry, the bundled matrix included, was still checked.",
    )]


def make_check_function(
    extra_dirs: tuple[Path, ...] = ()
) -> Callable[[ResolvedEnvironment], list[Finding]]:
    """The check over the bundled matrix plus a team's own directories (``--matrix DIR``)."""

    def check_known_issues(resolved: ResolvedEnvironment) -> list[Finding]:
        matrix = load_index(bundled_matrix_dir(), extra_dirs)
        env = environment_from_resolved(resolved)
        findings = matrix_findings(matrix)
        texts = given_texts(resolved.snapshot)
        shown = []
        if texts:
            from mgpu_doctor.matrix.evidence_findings import evidence_findings
            shown = evidence_findings(matrix.matrix().issues, env, texts)
        if resolved.snapshot is not None and "tensorflow" not in env.versions and "keras" not in env.versions:
            why = env.missing.get("tensorflow", "not known")
            if findings or shown:
                return findings + shown
            raise CheckSkipped(f"TensorFlow version {why}")
        named = {f.code for f in shown}
        by_versions = [f for f in findings_for(matrix, env)
                       if f.code not in named and not (shown and f.code == "matrix.no-known-issue")]
        return findings + shown + by_versions

    return check_known_issues


def given_texts(snapshot: Snapshot | None) -> list[GivenText]:
    """The texts whose lines may show the failure: a pasted text, the logs given with `--log`."""
    if snapshot is None:
        return []
    named = [(f"the log {log.origin}", log.lines) for log in snapshot.logs if log.lines]
    if snapshot.pasted is not None and snapshot.pasted.evidence:
        named.insert(0, ("the pasted text", snapshot.pasted.evidence))
    if not named:
        return []
    from mgpu_doctor.matrix.evidence_findings import GivenText
    return [GivenText(origin, lines) for origin, lines in named]


def findings_for(matrix: MatrixIndex, env: Environment) -> list[Finding]:
    """The known-issue findings for one environment; an ok finding when none applies.

    Only the index's candidates are assessed: the other entries cannot be reported for ``env``
    (tests/test_matrix_index.py compares this with assessing every entry)."""
    shown, counted = matrix.split_candidates(env)
    older = matrix.kept_lines("older", f"{_judging_code()} {env!r}",
                              lambda: older_lines([assess(i, env) for i in matrix.counted_entries(counted)]))
    found = known_issue_findings(shown, env, older=older)
    if not found:
        versions = ", ".join(f"{k} {v}" for k, v in env.versions.items()) or "none known"
        found.append(Finding(
            "matrix.no-known-issue", Severity.OK,
            f"none of {matrix.count} applies",
            [f"checked: {versions}", f"matrix: {', '.join(matrix.sources)}"],
        ))
    return found


@functools.cache
def _judging_code() -> str:
    """The code that judges an entry against an environment: kept lines are its answers, so a
    changed rule must not read them (the index's key covers the entries' own parsing)."""
    return hashlib.sha256(b"".join(Path(m.__file__).read_bytes() for m in (match, known_issue_findings_module)
                                   if m.__file__)).hexdigest()


check_known_issues = make_check_function()
