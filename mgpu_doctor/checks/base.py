"""What a check is, and how one runs: pure functions of the snapshot."""

from __future__ import annotations

import enum
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from mgpu_doctor.findings import CheckOutcome, CheckStatus, Finding, Severity, status_for

S = TypeVar("S")


class CheckSkipped(Exception):
    """Raised by a check whose facts are missing; the message says which and why."""


class Scope(str, enum.Enum):
    """What a check needs: a machine's facts, or only versions (so `matrix query` runs it too)."""

    MACHINE = "machine"
    VERSIONS = "versions"


@dataclass(frozen=True)
class Check(Generic[S]):
    """A named, pure rule: ``run(subject) -> findings``.

    The subject is one machine's (or one query's) resolved environment for ``check``, a whole
    fleet for ``fleet``. ``name`` is stable and selectable with ``--checks`` / ``--skip``. A
    check whose facts are missing raises :class:`CheckSkipped` with the reason: never reported
    as passed. ``scope`` VERSIONS marks the rules over versions that `matrix query` applies.
    """

    name: str
    title: str
    run: Callable[[S], list[Finding]]
    scope: Scope = Scope.MACHINE


def run_check(check: Check[S], subject: S) -> CheckOutcome:
    try:
        findings = check.run(subject)
    except CheckSkipped as exc:
        return CheckOutcome(check.name, check.title, CheckStatus.SKIPPED, skip_reason=str(exc))
    except Exception as exc:  # a broken check is a finding, never a traceback for the user
        crash = Finding(
            code=f"{check.name}.crashed",
            severity=Severity.CRASH,
            title=f"The check '{check.name}' itself failed: {type(exc).__name__}: {exc}",
            evidence=traceback.format_exc().strip().splitlines()[-6:],
            fix="This is a bug in mgpu-doctor. Please report it with the output of "
            "`mgpu-doctor report`.",
        )
        return CheckOutcome(check.name, check.title, CheckStatus.CRASHED, [crash])
    findings = sorted(findings, key=lambda f: f.severity, reverse=True)
    return CheckOutcome(check.name, check.title, status_for(findings), findings)
