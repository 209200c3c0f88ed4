"""The scaling map (pure): speedup of N devices over 1 across global batch × model size, and from
where N devices pay off.

Speed on N devices depends on how much work each device gets per step: below some global batch
and model size the gradient exchange costs more than the second device saves (the first seed of
this project measured 0.51x at batch 64 and 1.43x at 1024 on two GPUs). The map is the table of
those measurements; on simulated CPU devices it says nothing about GPUs and draws no speed finding.
"""

from __future__ import annotations

from collections.abc import Iterable

from mgpu_doctor.model.findings import CheckOutcome, Finding, Severity, status_for
from mgpu_doctor.model.smoke_runs import MapPoint, SmokeRun, map_points
from mgpu_doctor.record import record
from mgpu_doctor.smoke.guides import DISTRIBUTE_GUIDE, INPUT_GUIDE

PAYS_OFF = 1.0  # N devices at least as fast as 1: beyond this the extra devices pay for themselves
SIMULATED = "simulated on CPU: says nothing about GPUs"


@record
class Curve:
    """The map of one layer (and variant) on one device count: its points by model size and batch."""

    label: str  # "lstm-cudnn"
    devices: int
    points: tuple[MapPoint, ...]

    @property
    def layer(self) -> str:
        """The layer, whatever the variant: what codes and --layers name ("lstm")."""
        return self.points[0].layer

    @property
    def sizes(self) -> list[int]:
        return sorted({p.model_size for p in self.points})

    @property
    def batches(self) -> list[int]:
        return sorted({p.global_batch for p in self.points})

    @property
    def measured(self) -> list[MapPoint]:
        return [p for p in self.points if p.speedup is not None]

    @property
    def simulated(self) -> bool:
        return any(p.simulated for p in self.points)

    def at(self, size: int) -> list[MapPoint]:
        return sorted((p for p in self.points if p.model_size == size), key=lambda p: p.global_batch)

    def pays_off_from(self, size: int) -> int | None:
        """The smallest global batch from which every larger measured batch at ``size`` pays off
        (None: the largest measured batch does not)."""
        start = None
        for point in reversed(self.at(size)):
            if point.speedup is None:
                continue  # a failed cell neither pays off nor breaks the run of those that do
            if point.speedup < PAYS_OFF:
                break
            start = point.global_batch
        return start

    def best(self) -> MapPoint | None:
        return max(self.measured, key=lambda p: p.speedup or 0.0, default=None)


def curves(runs: Iterable[SmokeRun]) -> list[Curve]:
    """One curve per (layer, device count) that was measured at two or more cells."""
    grouped: dict[tuple[str, int], list[MapPoint]] = {}
    for point in map_points(runs):
        grouped.setdefault((point.label, point.devices), []).append(point)
    return [Curve(label, devices, tuple(points)) for (label, devices), points in grouped.items()
            if len({(p.global_batch, p.model_size) for p in points}) >= 2]


def on_a_curve(run: SmokeRun, runs: Iterable[SmokeRun]) -> bool:
    """Whether ``run`` is one of two or more cells of its layer's map (the map judges its speed)."""
    return (run.devices > 1 and run.scenario == "even"
            and any((c.label, c.devices) == (run.layer_variant, run.devices) for c in curves(runs)))


def size_label(size: int, parameters: int | None = None) -> str:
    counted = f", {parameters:,} parameters" if parameters is not None else ""
    return f"size x{size}{counted}"


def _range(values: list[int], prefix: str = "") -> str:
    return f"{prefix}{values[0]}" if len(values) == 1 else f"{prefix}{values[0]}-{prefix}{values[-1]}"


def _where(curve: Curve) -> str:
    sizes = curve.sizes
    return (f"global batch {_range(curve.batches)}"
            + (f", model size {_range(sizes, 'x')}" if len(sizes) > 1 else ""))


def _speedup(point: MapPoint) -> str:
    return "failed" if point.speedup is None else f"{point.speedup:.2f}x"


def _map_rows(curve: Curve) -> list[str]:
    rows = []
    for size in curve.sizes:
        points = curve.at(size)
        parameters = next((p.parameters for p in points if p.parameters is not None), None)
        cells = ", ".join(f"batch {p.global_batch}: " + _speedup(p) for p in points)
        rows.append(f"{curve.label}, {curve.devices} devices, {size_label(size, parameters)}: {cells}")
    return rows


def scaling_map_outcome(runs: list[SmokeRun]) -> CheckOutcome | None:
    """The map as one outcome: the table (info), and on GPUs, per layer, whether and from where N
    devices pay off. None where no layer was measured at two or more (batch, size) cells."""
    measured = [c for c in curves(runs) if c.measured]
    if not measured:
        return None
    simulated = any(c.simulated for c in measured)
    findings = [Finding(
        code="smoke.scaling-map", severity=Severity.INFO,
        title="Scaling map: speedup of N devices over 1 by global batch and model size"
              + (f" ({SIMULATED})" if simulated else ""),
        evidence=[row for curve in measured for row in _map_rows(curve)],
        fix="Train where the speedup is well above 1 (scale the learning rate with the global "
            "batch); below that the extra devices do not pay for their gradient exchange.",
        links=[INPUT_GUIDE],
    )]
    findings += [f for curve in measured if not curve.simulated for f in _pay_off_findings(curve)]
    return CheckOutcome("smoke/scaling-map", "Smoke trainings: scaling map over global batch and model size",
                        status_for(findings), findings)


def _pay_off_findings(curve: Curve) -> list[Finding]:
    code = f"smoke.{curve.layer}"
    best = curve.best()
    if best is None:
        return []
    if best.speedup is not None and best.speedup < PAYS_OFF:
        return [Finding(
            code=f"{code}.never-pays-off", severity=Severity.WARNING,
            title=f"{curve.label}: {curve.devices} GPUs never beat 1 in the measured range "
                  f"({_where(curve)}; best {best.speedup:.2f}x at batch {best.global_batch}, "
                  f"size x{best.model_size})",
            evidence=_map_rows(curve),
            fix="At these sizes train on one GPU (or run one job per GPU). N GPUs pay off only with "
                "more work per step: measure larger global batches and models "
                f"(`mgpu-doctor smoke --layers {curve.layer} --batch-sizes "
                f"{curve.batches[-1]},{curve.batches[-1] * 4} --model-sizes "
                f"{curve.sizes[-1]},{curve.sizes[-1] * 4}`), and check the links between the GPUs "
                "(`mgpu-doctor check`: P2P, PCIe) and that the input pipeline keeps up.",
            links=[DISTRIBUTE_GUIDE, INPUT_GUIDE],
        )]
    where = []
    for size in curve.sizes:
        start = curve.pays_off_from(size)
        where.append(f"size x{size}: " + (f"from global batch {start}" if start is not None
                                          else "not in the measured batches"))
    return [Finding(
        code=f"{code}.pays-off", severity=Severity.INFO,
        title=f"{curve.label}: {curve.devices} GPUs pay off ({'; '.join(where)})",
        evidence=_map_rows(curve),
        fix="Train at a global batch (and model size) where N GPUs pay off; below it one GPU "
            "is as fast.",
        links=[DISTRIBUTE_GUIDE],
    )]
