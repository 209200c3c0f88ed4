"""Run a check of the registry on a snapshot, as `check` does: through the resolved environment."""

from __future__ import annotations

from mgpu_doctor.checks.base import Check, run_check
from mgpu_doctor.environment.resolve import ResolvedEnvironment, resolve
from mgpu_doctor.model.findings import CheckOutcome
from mgpu_doctor.model.snapshot import Snapshot


def judge(check: Check[ResolvedEnvironment], snapshot: Snapshot) -> CheckOutcome:
    return run_check(check, resolve(snapshot))
