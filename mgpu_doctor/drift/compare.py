"""What changed between a known-good run and this one, fact by fact (pure functions).

Versions and the environment are lined up with the fleet comparison (:func:`build_fleet` over two
"nodes": then and now); GPUs are matched by UUID; checks and smoke runs by name. A change takes the
severity of the check that judges it where that check objects now (its worst finding); a change no
check objects to is info, or a warning for the driver, the CUDA libraries and the GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mgpu_doctor.environment.readings import ResolvedVersion
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.fleet.compare import Fact, FactFamily, build_fleet, describe
from mgpu_doctor.model.drift import Drift, DriftRow
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.model.snapshot import GpuFacts, Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import record

NOT_SET = "not set"


@record
class Subject:
    """A compared version: its key (the code's middle segment), label, how to read it, the checks
    that judge it, and the severity of a change no check judged."""

    key: str
    label: str
    pick: Callable[[ResolvedEnvironment], ResolvedVersion]
    judged_by: tuple[str, ...]
    alone: Severity = Severity.INFO


SUBJECTS = (
    Subject(
        "tensorflow",
        "TensorFlow",
        lambda e: e.tensorflow,
        (
            "tensorflow-import",
            "keras",
            "python",
            "tensorflow-requires",
            "cuda-libraries",
            "and-cuda-wheels",
            "gpu-architecture",
            "known-issues",
        ),
    ),
    Subject("keras", "Keras", lambda e: e.keras, ("keras", "versions-agree", "known-issues")),
    Subject("python", "Python", lambda e: e.python, ("python", "interpreter", "tensorflow-requires")),
    Subject(
        "driver",
        "NVIDIA driver",
        lambda e: e.driver,
        ("gpus", "driver-cuda", "container-gpus"),
        Severity.WARNING,
    ),
    Subject(
        "cuda",
        "CUDA runtime",
        lambda e: e.cuda,
        ("cuda-libraries", "and-cuda-wheels", "driver-cuda", "ptxas"),
        Severity.WARNING,
    ),
    Subject(
        "cudnn",
        "cuDNN",
        lambda e: e.cudnn,
        ("cuda-libraries", "and-cuda-wheels", "library-copies"),
        Severity.WARNING,
    ),
    Subject(
        "cublas",
        "cuBLAS",
        lambda e: e.cublas,
        ("cuda-libraries", "and-cuda-wheels", "library-copies"),
        Severity.WARNING,
    ),
    Subject(
        "nccl",
        "NCCL",
        lambda e: e.nccl,
        ("and-cuda-wheels", "nccl-environment", "known-issues"),
        Severity.WARNING,
    ),
)
ENV_JUDGES = ("cuda-visible-devices", "tensorflow-log-level", "cuda-environment", "nccl-environment", "ptxas")
GPU_JUDGES = (
    "gpus",
    "gpu-uniformity",
    "gpu-architecture",
    "tensorflow-gpus",
    "cuda-device-order",
    "gpu-ecc",
    "gpu-pcie-link",
)
CODES = (
    "drift.none",
    "drift.VERSION.changed",
    "drift.gpu.added",
    "drift.gpu.removed",
    "drift.gpu.replaced",
    "drift.env.changed",
    "drift.check.now-fails",
    "drift.check.now-passes",
    "drift.smoke.now-fails",
    "drift.smoke.now-passes",
)


def _version(
    pick: Callable[[ResolvedEnvironment], ResolvedVersion],
) -> Callable[[ResolvedEnvironment], str | Unavailable]:
    def extract(env: ResolvedEnvironment) -> str | Unavailable:
        value = pick(env)
        return value.text if value.chosen is not None else value.missing or Unavailable("absent", "not known")

    return extract


def _env(env: ResolvedEnvironment) -> Mapping[str, str]:
    assert env.snapshot is not None
    return dict(env.snapshot.env)


FACTS: tuple[Fact | FactFamily, ...] = tuple(
    Fact(f"version.{s.key}", s.label, _version(s.pick)) for s in SUBJECTS
) + (FactFamily("env", "env", _env, missing=NOT_SET),)


def compare(
    baseline: Snapshot,
    current: Snapshot,
    *,
    baseline_source: str,
    then_checks: Mapping[str, CheckStatus],
    now_checks: list[CheckOutcome],
    then_smoke: list[SmokeRun],
    now_smoke: list[SmokeRun],
) -> Drift:
    """The changes from ``baseline`` to ``current``; ``then_checks`` are the baseline's check statuses
    (recorded in its report, or judged again from its snapshot)."""
    worst_now = {o.name: o.worst for o in now_checks if o.status is not CheckStatus.SKIPPED}
    fleet = build_fleet([("baseline", baseline), ("now", current)], FACTS)
    then_name, now_name = fleet.node_names
    rows: list[DriftRow] = []
    subjects = {f"version.{s.key}": s for s in SUBJECTS}
    for row in fleet.rows:
        then, now = row.values[then_name], row.values[now_name]
        if row.status != "differs" and isinstance(then, str) == isinstance(now, str):
            continue
        if isinstance(then, Unavailable) and isinstance(now, Unavailable):
            continue
        subject = subjects.get(row.key)
        if subject is not None:
            code, judges, alone = f"drift.{subject.key}.changed", subject.judged_by, subject.alone
        else:
            code, judges, alone = "drift.env.changed", ENV_JUDGES, Severity.INFO
        severity, by = _judged(judges, worst_now, alone)
        rows.append(DriftRow(code, row.label, describe(then), describe(now), severity, by))
    rows += _gpus(baseline, current, worst_now)
    rows += _checks(then_checks, now_checks)
    rows += _smoke(then_smoke, now_smoke)
    compared = (
        len(fleet.rows) + len(then_checks) + len(then_smoke) + _gpu_count(baseline) + _gpu_count(current)
    )
    return Drift(baseline_source, baseline.created, rows, compared)


def _judged(
    judges: tuple[str, ...], worst_now: Mapping[str, Severity], alone: Severity
) -> tuple[Severity, list[str]]:
    """The severity of a change: the worst verdict now of the checks that judge it where one objects
    (a warning or an error); else the change alone's (the checks passing does not make it nothing)."""
    verdicts = {name: worst_now[name] for name in judges if name in worst_now}
    worst = max(verdicts.values(), default=Severity.OK)
    if worst <= Severity.INFO:
        return alone, []
    return worst, sorted(n for n, s in verdicts.items() if s == worst)


def _gpu_count(snapshot: Snapshot) -> int:
    return 0 if isinstance(snapshot.nvml, Unavailable) else len(snapshot.nvml.gpus)


def _gpu_text(gpu: GpuFacts) -> str:
    return f"{gpu.name} ({gpu.uuid or 'no UUID'}, bus {gpu.pci_bus_id})"


def _gpus(baseline: Snapshot, current: Snapshot, worst_now: Mapping[str, Severity]) -> list[DriftRow]:
    """GPUs by UUID: one at the same index with another UUID was replaced; the rest added or removed."""
    if isinstance(baseline.nvml, Unavailable) or isinstance(current.nvml, Unavailable):
        return []
    then = {g.uuid: g for g in baseline.nvml.gpus if g.uuid}
    now = {g.uuid: g for g in current.nvml.gpus if g.uuid}
    gone = [g for u, g in then.items() if u not in now]
    new = [g for u, g in now.items() if u not in then]
    severity, by = _judged(GPU_JUDGES, worst_now, Severity.WARNING)
    rows = []
    for old in list(gone):
        replacement = next((g for g in new if g.index == old.index), None)
        if replacement is not None:
            gone.remove(old)
            new.remove(replacement)
            rows.append(
                DriftRow(
                    "drift.gpu.replaced",
                    f"GPU {old.index}",
                    _gpu_text(old),
                    _gpu_text(replacement),
                    severity,
                    by,
                )
            )
    rows += [
        DriftRow("drift.gpu.removed", f"GPU {g.index}", _gpu_text(g), "not there", severity, by) for g in gone
    ]
    rows += [
        DriftRow("drift.gpu.added", f"GPU {g.index}", "not there", _gpu_text(g), severity, by) for g in new
    ]
    return rows


def _checks(then: Mapping[str, CheckStatus], now: list[CheckOutcome]) -> list[DriftRow]:
    failing = (CheckStatus.WARNING, CheckStatus.FAILED, CheckStatus.CRASHED)
    rows = []
    for outcome in now:
        before = then.get(outcome.name)
        if before is None or before is CheckStatus.SKIPPED or outcome.status is CheckStatus.SKIPPED:
            continue
        if before not in failing and outcome.status in failing:
            rows.append(
                DriftRow(
                    "drift.check.now-fails",
                    outcome.title,
                    before.value,
                    outcome.status.value,
                    outcome.worst,
                    [outcome.name],
                )
            )
        elif before in failing and outcome.status not in failing:
            rows.append(
                DriftRow(
                    "drift.check.now-passes",
                    outcome.title,
                    before.value,
                    outcome.status.value,
                    Severity.INFO,
                    [outcome.name],
                )
            )
    return rows


def smoke_key(run: SmokeRun) -> str:
    variant = f"-{run.variant}" if run.variant else ""
    size = f" x{run.model_size}" if run.model_size != 1 else ""
    return (f"{run.layer}{variant}{size} on {run.devices} {run.device_kind} ({run.scenario}, "
            f"batch {run.global_batch})")


def _smoke(then: list[SmokeRun], now: list[SmokeRun]) -> list[DriftRow]:
    before = {smoke_key(r): r.status for r in then}
    rows = []
    for run in now:
        key = smoke_key(run)
        if key not in before:
            continue
        if before[key] == "ok" and run.status != "ok":
            rows.append(
                DriftRow("drift.smoke.now-fails", f"smoke {key}", "ok", run.status, Severity.ERROR, ["smoke"])
            )
        elif before[key] != "ok" and run.status == "ok":
            rows.append(
                DriftRow(
                    "drift.smoke.now-passes", f"smoke {key}", before[key], "ok", Severity.INFO, ["smoke"]
                )
            )
    return rows
