"""Turn one child's raw result into a `SmokeRun` (pure: statistics and status)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from mgpu_doctor.model.smoke_runs import STATUSES, InputRound, LeakCycle, NonfiniteOrigin, SmokeRun, SmokeSpec
from mgpu_doctor.record import record
from mgpu_doctor.smoke.checkpoint import CHECKPOINT_SCENARIOS, checkpoint_status, steps_from_child

DIVERGE_FACTOR = 10.0  # final loss this many times the first one: the training blew up
MAX_TEXT = 6000


def slope(values: list[float]) -> float | None:
    """Least-squares growth per epoch, leaving out the first epoch (tracing, warm-up); None with
    fewer than 3 epochs (a level that trains 2 says nothing about memory growth)."""
    points = values[1:]
    if len(points) < 2:
        return None
    n = len(points)
    mean_x, mean_y = (n - 1) / 2, sum(points) / n
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(points))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


@record
class SignalDeath:
    """One attempt of a run that died by a signal, and the OOM kills the kernel counted meanwhile."""

    signal: str
    oom_kills: int | None  # None: the count could not be read

    @property
    def out_of_memory(self) -> bool:
        # The OOM killer always sends SIGKILL; a SIGKILL while its count went up is its doing.
        return self.signal == "SIGKILL" and bool(self.oom_kills)

    def describe(self) -> str:
        if self.out_of_memory:
            return "killed by the kernel's OOM killer (SIGKILL, out of memory)"
        return f"died by {self.signal}"


def signal_deaths(data: Any) -> list[SignalDeath]:
    """The worker's record of attempts that died by a signal (``signal_deaths`` in runs.jsonl)."""
    if not isinstance(data, list):
        return []
    out = []
    for item in data:
        if isinstance(item, dict) and isinstance(item.get("signal"), str):
            kills = item.get("oom_kills")
            out.append(SignalDeath(item["signal"], kills if isinstance(kills, int) and
                                   not isinstance(kills, bool) else None))
    return out


def classify_signal_deaths(status: str, deaths: list[SignalDeath]) -> tuple[str, str]:
    """(status, retried_after) of a run whose attempts that died by a signal are ``deaths``.

    The worker tries a run that died by a signal once more: a crash of the layer is a crash of
    both attempts. The last attempt killed by the OOM killer is out of memory ("oom"), whatever
    the layer; a first attempt that died is told in ``retried_after`` beside the final status.
    """
    if not deaths:
        return status, ""
    if status == "crash" and deaths[-1].out_of_memory:
        status = "oom"
    return status, deaths[0].describe()


def run_from_child(spec: SmokeSpec, data: dict[str, Any]) -> SmokeRun:
    """A finished run as the child reported it (``data``: one line of runs.jsonl)."""
    status = str(data.get("status", "error"))
    if status not in STATUSES:
        status = "error"
    status, retried_after = classify_signal_deaths(status, signal_deaths(data.get("signal_deaths")))
    losses = [_float(v) for v in data.get("losses", [])]
    if status == "ok" and diverged(losses):
        status = "diverged"
    checkpoint = steps_from_child(data.get("checkpoint"))
    if spec.scenario in CHECKPOINT_SCENARIOS:
        status = checkpoint_status(status, checkpoint)
    median = _median_step(data.get("step_times_s"))
    rounds = input_rounds_from_child(spec, data.get("input_rounds"))
    rss = [float(v) for v in data.get("rss_mb", [])]
    gpu = [float(v) for v in data.get("gpu_memory_mb", [])]
    return SmokeRun(
        **_spec_fields(spec),
        status=status,
        framework=str(data.get("framework", "")),
        losses=losses,
        nonfinite_epoch=data.get("nonfinite_epoch") if isinstance(data.get("nonfinite_epoch"), int) else None,
        weights_finite=data.get("weights_finite") if isinstance(data.get("weights_finite"), bool) else None,
        replicas_identical=(data.get("replicas_identical")
                            if isinstance(data.get("replicas_identical"), bool) else None),
        replica_max_abs_diff=_float(data.get("replica_max_abs_diff")),
        replica_state_max_abs_diff=_float(data.get("replica_state_max_abs_diff")),
        median_step_s=median,
        samples_per_s=(spec.global_batch / median) if median else None,
        rss_mb=rss,
        rss_slope_mb_per_epoch=slope(rss),
        gpu_memory_mb=gpu,
        gpu_memory_slope_mb_per_epoch=slope(gpu),
        error_type=str(data.get("error_type", "")),
        error_message=str(data.get("error_message", ""))[-MAX_TEXT:],
        traceback=str(data.get("traceback", ""))[-MAX_TEXT:],
        signal=str(data.get("signal", "")),
        retried_after=retried_after,
        stderr_tail=str(data.get("stderr_tail", ""))[-MAX_TEXT:],
        duration_s=float(data.get("duration_s", 0.0) or 0.0),
        checkpoint=checkpoint,
        parameters=_count(data.get("parameters")),
        input_samples_per_s=_mean(r.input_samples_per_s for r in rounds),
        compute_samples_per_s=_mean(r.compute_samples_per_s for r in rounds),
        input_rounds=rounds,
        leak_cycles=leak_cycles_from_child(data.get("leak_cycles")),
        skip_reason=str(data.get("skip_reason", "")) if status == "skipped" else "",
        split_replicas=_count(data.get("split_replicas")) or 0,
        split_losses=[_float(v) for v in data.get("split_losses", []) or []],
        split_layers=[str(v) for v in data.get("split_layers", []) or []],
        split_skipped=str(data.get("split_skipped", "")),
        nonfinite_origin=origin_from_child(data.get("nonfinite_origin")) if status == "nan" else None,
    )


def origin_from_child(data: Any) -> NonfiniteOrigin | None:
    """The ``nonfinite_origin`` dict of one line of runs.jsonl (malformed values dropped)."""
    if not isinstance(data, dict):
        return None

    def text(key: str) -> str:
        return str(data.get(key) or "")[:MAX_TEXT]

    def ints(value: Any) -> list[int]:
        return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []

    shapes = data.get("batch_shapes")
    return NonfiniteOrigin(
        kind=text("kind"), name=text("name"), layer_class=text("layer_class"), value=text("value"),
        epoch=_count(data.get("epoch")), step=_count(data.get("step")), replica=_count(data.get("replica")),
        replicas=_count(data.get("replicas")) or 0, on_replicas=ints(data.get("on_replicas")),
        batch_shapes=[[d if isinstance(d, int) else None for d in s] for s in shapes if isinstance(s, list)]
        if isinstance(shapes, list) else [],
        also=[str(v) for v in data.get("also", []) or [] if isinstance(v, str)],
        how=text("how"), error=text("error") or text("replay_error"),
    )


def input_rounds_from_child(spec: SmokeSpec, data: Any) -> list[InputRound]:
    """The input-bound probe's rounds of one line of runs.jsonl: each its pipeline's samples over
    its seconds, and the global batch over the median of its steps fed from memory."""
    if not isinstance(data, list):
        return []
    rounds = []
    for item in data:
        if not isinstance(item, dict):
            continue
        samples, seconds = _count(item.get("samples")), _positive(item.get("seconds"))
        step = _median_step(item.get("step_times_s"))
        rounds.append(InputRound(
            input_samples_per_s=samples / seconds if samples and seconds else None,
            compute_samples_per_s=spec.global_batch / step if step else None,
            batches=_count(item.get("batches")) or 0, seconds=seconds or 0.0,
            dataset_batches=_count(item.get("dataset_batches")),
        ))
    return rounds


def _mean(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def leak_cycles_from_child(data: Any) -> list[LeakCycle]:
    """The leak probe's ``leak_cycles`` list of one line of runs.jsonl (malformed items dropped)."""
    if not isinstance(data, list):
        return []
    return [LeakCycle(phase=item["phase"], cycle=item["cycle"], rss_anon_mb=_float(item.get("rss_anon_mb")),
                      gpu_mb=_float(item.get("gpu_mb")), seconds=_float(item.get("seconds")) or 0.0)
            for item in data if isinstance(item, dict) and isinstance(item.get("phase"), str)
            and _count(item.get("cycle")) is not None]


def failed_run(spec: SmokeSpec, status: str, *, error_type: str = "", message: str = "",
               signal: str = "", stacks: str = "", stderr_tail: str = "",
               duration_s: float = 0.0, retried_after: str = "") -> SmokeRun:
    """A run the worker could not report itself (a hang, or the worker died)."""
    return SmokeRun(**_spec_fields(spec), status=status, error_type=error_type,
                    error_message=message, signal=signal, stacks=stacks[-MAX_TEXT:],
                    stderr_tail=stderr_tail[-MAX_TEXT:], duration_s=duration_s,
                    retried_after=retried_after)


def _spec_fields(spec: SmokeSpec) -> dict[str, Any]:
    return dict(layer=spec.layer, variant=spec.variant, devices=spec.devices,
                device_kind=spec.device_kind, scenario=spec.scenario,
                global_batch=spec.global_batch, samples=spec.samples, epochs=spec.epochs,
                model_size=spec.model_size)


def diverged(losses: list[float | None]) -> bool:
    finite = [v for v in losses if v is not None]
    if len(finite) < 2:
        return False
    return finite[-1] > DIVERGE_FACTOR * max(finite[0], 1e-12) or finite[-1] > 1e6


def _median_step(times: Any) -> float | None:
    """The median of a child's step times in seconds (None: none reported)."""
    steps = [float(t) for t in times or [] if isinstance(t, int | float) and not isinstance(t, bool)]
    return statistics.median(steps) if steps else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _positive(value: Any) -> float | None:
    number = _float(value)
    return number if number is not None and number > 0 else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None
