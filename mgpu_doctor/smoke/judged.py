"""The smoke section's result (`SmokeSection`) and its runs judged: the rules' outcomes, with the
verdict of the known-issue matrix for each failed run. Shared by the TensorFlow and JAX sections."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mgpu_doctor.environment.matrix_view import environment_from_resolved
from mgpu_doctor.environment.resolve import ResolvedEnvironment, resolve
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import CheckOutcome
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.record import field, record
from mgpu_doctor.smoke.known_issues import SmokeRunLike, with_known_issues
from mgpu_doctor.smoke.leak import with_leak_verdicts
from mgpu_doctor.smoke.rules import smoke_outcomes


@record(frozen=False)
class SmokeSection:
    """What the smoke suite adds to a report."""

    outcomes: list[CheckOutcome] = field(default_factory=list)
    runs: list[SmokeRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    snapshot: Snapshot | None = None  # with TensorFlow's view added when it had to be probed


def judged_outcomes(
    runs: list[SmokeRun], snapshot: Snapshot, matrix_dirs: tuple[Path, ...] = (),
    stall_timeout_s: float | None = None, resolved: ResolvedEnvironment | None = None,
) -> list[CheckOutcome]:
    """One outcome per run; a failed run also says whether the known-issue matrix explains it."""
    tried = [r for r in runs if r.status != "skipped"]  # a skipped run did not fail
    return with_matrix_verdicts(smoke_outcomes(runs, stall_timeout_s), tried, snapshot, matrix_dirs,
                                resolved=resolved)


def with_matrix_verdicts(
    outcomes: list[CheckOutcome], failed: Sequence[SmokeRunLike], snapshot: Snapshot,
    matrix_dirs: tuple[Path, ...] = (), strategy: str = "mirrored",
    resolved: ResolvedEnvironment | None = None,
) -> list[CheckOutcome]:
    """The outcomes of the ``failed`` runs gain the verdict of the bundled (and --matrix) entries;
    ``resolved``: the machine's environment with the training profile applied (default: the
    snapshot's), whose layers and usage the user's model's runs are looked up with."""
    matrix = load_matrix(bundled_matrix_dir(), matrix_dirs)  # its problems: the known-issues check's
    environment = environment_from_resolved(resolved if resolved is not None else resolve(snapshot))
    outcomes = with_known_issues(outcomes, failed, matrix.issues, environment, strategy=strategy)
    probed = [run for run in failed if isinstance(run, SmokeRun)]  # the leak probe looks clean runs up too
    return with_leak_verdicts(outcomes, probed, matrix.issues, environment, strategy=strategy)
