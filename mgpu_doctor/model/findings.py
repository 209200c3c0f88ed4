"""Findings: what is wrong, the evidence, and what to do about it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.Enum):
    """Ordered: ok < info < warning < error < crash (a check that itself broke)."""

    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRASH = "crash"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __lt__(self, other: Severity) -> bool:
        return self.rank < other.rank

    def __le__(self, other: Severity) -> bool:
        return self.rank <= other.rank

    def __gt__(self, other: Severity) -> bool:
        return self.rank > other.rank

    def __ge__(self, other: Severity) -> bool:
        return self.rank >= other.rank


_RANK = {s: i for i, s in enumerate(Severity)}


@dataclass(frozen=True)
class Acknowledgement:
    """An entry of the acknowledge file that matched a finding (see ``mgpu_doctor.gate.acks``).

    While it has not ``expired`` the finding is still reported but does not fail the gate.
    """

    reason: str
    expires: str  # ISO date; the acknowledgement holds through that day
    source: str  # "FILE: entry N"
    expired: bool = False


@dataclass(frozen=True)
class Finding:
    """One problem (or one notable fact) with its evidence and its fix.

    ``code`` is stable across releases (CI acknowledge files and JUnit names rely on it).
    ``evidence`` holds "fact: value" lines; ``fix`` says what to do, concretely.
    """

    code: str
    severity: Severity
    title: str
    evidence: list[str] = field(default_factory=list)
    fix: str = ""
    links: list[str] = field(default_factory=list)
    acknowledgement: Acknowledgement | None = None

    @property
    def gating(self) -> bool:
        """Whether this finding can fail the gate: not covered by a current acknowledgement."""
        return self.acknowledgement is None or self.acknowledgement.expired


# The outcome `check` adds when most checks were skipped for facts that could not be gathered.
MOSTLY_SKIPPED_CHECK = "facts-gathered"


class Section(enum.Enum):
    """The groups the human report shows checks in, in this order (as `flutter doctor` groups its
    validators). A check's section is declared with it, in its registry."""

    GPUS = "gpus"
    TENSORFLOW = "tensorflow"
    CUDA_LIBRARIES = "cuda-libraries"
    HOST = "host"
    KNOWN_ISSUES = "known-issues"
    SMOKE = "smoke"
    REQUIREMENTS = "requirements"

    @property
    def title(self) -> str:
        return _SECTION_TITLES[self]


_SECTION_TITLES = {
    Section.GPUS: "GPUs and driver",
    Section.TENSORFLOW: "Python, TensorFlow and Keras",
    Section.CUDA_LIBRARIES: "CUDA libraries",
    Section.HOST: "Host and collectives",
    Section.KNOWN_ISSUES: "Known issues",
    Section.SMOKE: "Smoke trainings",
    Section.REQUIREMENTS: "Requirements",
}


class CheckStatus(enum.Enum):
    PASSED = "passed"
    INFO = "info"
    WARNING = "warning"
    FAILED = "failed"
    SKIPPED = "skipped"
    CRASHED = "crashed"


@dataclass(frozen=True)
class CheckOutcome:
    """What one check concluded: a status, its findings, or why it was skipped."""

    name: str
    title: str
    status: CheckStatus
    findings: list[Finding] = field(default_factory=list)
    skip_reason: str = ""
    fact_failed: bool = False  # skipped because a fact could not be gathered (not "does not apply")
    section: Section | None = None  # where the human report lists it; None: before every section

    @property
    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), default=Severity.OK)


def status_for(findings: list[Finding]) -> CheckStatus:
    worst = max((f.severity for f in findings), default=Severity.OK)
    return {
        Severity.OK: CheckStatus.PASSED,
        Severity.INFO: CheckStatus.INFO,
        Severity.WARNING: CheckStatus.WARNING,
        Severity.ERROR: CheckStatus.FAILED,
        Severity.CRASH: CheckStatus.CRASHED,
    }[worst]
