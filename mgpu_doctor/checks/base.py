"""What a check is, and how one runs: pure functions of the snapshot."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Generic, TypeVar

from mgpu_doctor.model.codes import crash_code, is_declared
from mgpu_doctor.model.findings import (
    MOSTLY_SKIPPED_CHECK,
    CheckOutcome,
    CheckStatus,
    Finding,
    Section,
    Severity,
    status_for,
)
from mgpu_doctor.record import record

S = TypeVar("S")


class CheckSkipped(Exception):
    """Raised by a check whose facts are missing; the message says which and why.

    ``fact_failed``: the fact could not be gathered (NVML or a probe failed), as opposed to not
    applying (no GPU, ``--quick``): many of those make the run say so and fail ``--fail-on
    warning`` (:func:`mostly_skipped`)."""

    def __init__(self, reason: str, fact_failed: bool = False) -> None:
        super().__init__(reason)
        self.fact_failed = fact_failed


class Scope(str, enum.Enum):
    """What a check needs: a machine's facts, or only versions (so `matrix query` runs it too)."""

    MACHINE = "machine"
    VERSIONS = "versions"


@record
class Check(Generic[S]):
    """A named, pure rule: ``run(subject) -> findings``.

    The subject is one machine's (or one query's) resolved environment for ``check``, a whole
    fleet for ``fleet``. ``name`` is stable and selectable with ``--checks`` / ``--skip``. A
    check whose facts are missing raises :class:`CheckSkipped` with the reason: never reported
    as passed. ``scope`` VERSIONS marks the rules over versions that `matrix query` applies.
    ``section`` is where the human report lists it. ``codes`` are the finding codes it can emit
    (see :mod:`mgpu_doctor.model.codes`); a finding with another code makes the check a crash, so a
    code cannot reach users without being declared, documented and aliased when renamed (every
    registered check declares its codes: a test holds that).
    """

    name: str
    title: str
    run: Callable[[S], list[Finding]]
    scope: Scope = Scope.MACHINE
    section: Section | None = None
    codes: tuple[str, ...] = ()


class UndeclaredCode(Exception):
    """A check emitted a finding code it does not declare: a bug of the check."""


def run_check(check: Check[S], subject: S) -> CheckOutcome:
    try:
        findings = check.run(subject)
        undeclared = [f.code for f in findings if not is_declared(f.code, check.codes)]
        if check.codes and undeclared:
            raise UndeclaredCode(f"it emitted {', '.join(undeclared)}, not among the codes it declares "
                                 f"({', '.join(check.codes) or 'none'})")
    except CheckSkipped as exc:
        return CheckOutcome(check.name, check.title, CheckStatus.SKIPPED, skip_reason=str(exc),
                            fact_failed=exc.fact_failed, section=check.section)
    except Exception as exc:  # a broken check is a finding, never a traceback for the user
        import traceback  # only here: `check --quick` pays for every import on every run

        crash = Finding(
            code=crash_code(check.name),
            severity=Severity.CRASH,
            title=f"The check '{check.name}' itself failed: {type(exc).__name__}: {exc}",
            evidence=traceback.format_exc().strip().splitlines()[-6:],
            fix="This is a bug in mgpu-doctor. Please report it with the output of "
            "`mgpu-doctor report`.",
        )
        return CheckOutcome(check.name, check.title, CheckStatus.CRASHED, [crash], section=check.section)
    findings = sorted(findings, key=lambda f: f.severity, reverse=True)
    return CheckOutcome(check.name, check.title, status_for(findings), findings, section=check.section)


MOSTLY_SKIPPED_CODE = "facts.mostly-skipped"


# Checks of the snapshot itself, not of the environment: they verify nothing about the machine,
# so they count neither way when judging how much of it could be checked.
ABOUT_THE_SNAPSHOT = frozenset({"snapshot-values"})


def mostly_skipped(outcomes: list[CheckOutcome]) -> CheckOutcome | None:
    """A warning outcome when more than half of the checks were skipped because a fact could
    not be gathered: such a run verified little, and must not read as a clean pass."""
    outcomes = [o for o in outcomes if o.name not in ABOUT_THE_SNAPSHOT]
    failed = [o for o in outcomes if o.status is CheckStatus.SKIPPED and o.fact_failed]
    if not outcomes or len(failed) * 2 <= len(outcomes):
        return None
    reasons = list(dict.fromkeys(o.skip_reason for o in failed))
    finding = Finding(
        MOSTLY_SKIPPED_CODE, Severity.WARNING,
        f"{len(failed)} of {len(outcomes)} checks could not run: the facts they need could not be gathered",
        [f"{o.name}: {o.skip_reason}" for o in failed[:8]] + ([f"... and {len(failed) - 8} more"]
                                                               if len(failed) > 8 else []),
        fix="Fix what failed first (" + "; ".join(reasons[:3]) + "), then run the doctor again: "
        "until then this environment is not verified.",
    )
    return CheckOutcome(MOSTLY_SKIPPED_CHECK, "The facts the checks need could be gathered",
                        CheckStatus.WARNING, [finding])
