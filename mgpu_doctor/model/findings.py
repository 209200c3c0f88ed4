"""Findings: what is wrong, the evidence, and what to do about it."""

from __future__ import annotations

import enum

from mgpu_doctor.record import field, record


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


@record
class Acknowledgement:
    """An entry of the acknowledge file that matched a finding (see ``mgpu_doctor.gate.acks``).

    While it has not ``expired`` the finding is still reported but does not fail the gate.
    """

    reason: str
    expires: str  # ISO date; the acknowledgement holds through that day
    source: str  # "FILE: entry N"
    expired: bool = False


@record
class Condition:
    """The one fact that would decide a conditional finding (a known issue that applies only if
    the training is so, or that cannot be told without a machine fact): findings are grouped by it.
    """

    key: str  # a `matrix query` key: "usage", "strategy", "layers", "scenario", "workers", "numpy", ...
    wanted: tuple[str, ...]  # what the entry needs (any of): ("custom_training_loop",), (">=2",)
    phrase: str  # "if you save the distributed model (...)", "without the numpy version"
    hint: str  # how to decide it: "--usage save_model"; "" where no option does
    training: bool  # a training fact (declare it in the profile) or a machine fact


@record
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
    condition: Condition | None = None  # a conditional finding: the fact that would decide it

    @property
    def gating(self) -> bool:
        """Whether this finding can fail the gate: not covered by a current acknowledgement."""
        return self.acknowledgement is None or self.acknowledgement.expired


@record
class ConditionGroup:
    """Conditional findings that one fact decides: one per key and wanted value."""

    condition: Condition
    findings: tuple[Finding, ...]


def condition_groups(findings: list[Finding]) -> list[ConditionGroup]:
    """The conditional findings grouped by their condition (key, wanted): training facts before
    machine facts, the larger groups first, then in the order met; the groups of one key together."""
    groups: dict[tuple[str, tuple[str, ...]], tuple[Condition, list[Finding]]] = {}
    for f in findings:
        if f.condition is not None:
            groups.setdefault((f.condition.key, f.condition.wanted), (f.condition, []))[1].append(f)
    ranked = [ConditionGroup(c, tuple(fs)) for _, (c, fs) in sorted(
        enumerate(groups.values()), key=lambda item: (not item[1][0].training, -len(item[1][1]), item[0]))]
    # the groups of one training fact together (as the report shows them, one line per fact);
    # the machine facts together last
    keys = list(dict.fromkeys(g.condition.key if g.condition.training else "" for g in ranked))
    return sorted(ranked, key=lambda g: keys.index(g.condition.key if g.condition.training else ""))


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


@record
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
