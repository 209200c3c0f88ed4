"""Input-bound detection (pure): can the input pipeline feed the devices?

The child times the run's `tf.data` pipeline alone (nothing training) and the same training step
on the N devices fed from one batch kept in memory (no input cost). When the pipeline delivers
fewer samples per second than the devices consume, every step waits for input and more devices
cannot make the training faster. On simulated CPU devices the finding still holds: GPUs consume
faster than the CPU, so a pipeline too slow for the simulation is too slow for them.
"""

from __future__ import annotations

from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.smoke.guides import INPUT_GUIDE

# The pipeline must deliver at least what the devices consume; below, the devices idle.
FEEDS = 1.0
INPUT_FIX = (
    "Make the input pipeline faster than the devices consume: end it with "
    "`dataset.prefetch(tf.data.AUTOTUNE)` so input overlaps the step; `dataset.cache()` after the "
    "expensive deterministic steps (decoding, resizing), in memory or to a local file; "
    "`dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE)` for per-sample work; "
    "`interleave(..., num_parallel_calls=tf.data.AUTOTUNE)` to read several files at once; "
    "and give the job more host CPUs (`mgpu-doctor check` shows the CPUs it may use)."
)


def headroom(run: SmokeRun) -> float | None:
    """How many times over the pipeline alone could feed the devices (below 1: they wait)."""
    return run.input_headroom


def input_bound(run: SmokeRun) -> bool:
    ratio = headroom(run)
    return run.status == "ok" and ratio is not None and ratio < FEEDS


def input_rates(run: SmokeRun) -> list[str]:
    """The probe's measurements, for any run that has them."""
    if run.input_samples_per_s is None or run.compute_samples_per_s is None:
        return []
    where = (f"{run.devices} simulated CPU devices" if run.simulated else f"{run.devices} GPU(s)")
    lines = [f"input pipeline alone (nothing training): {run.input_samples_per_s:,.0f} samples/s",
             f"training step on {where} fed from memory: {run.compute_samples_per_s:,.0f} samples/s"]
    if run.samples_per_s is not None:
        lines.append(f"training fed by the pipeline: {run.samples_per_s:,.0f} samples/s")
    return lines


def input_bound_findings(run: SmokeRun, label: str) -> list[Finding]:
    if not input_bound(run):
        return []
    supply, demand = run.input_samples_per_s or 0.0, run.compute_samples_per_s or 1.0
    waiting = 1.0 - (headroom(run) or 0.0)
    evidence = [*input_rates(run),
                f"the devices would wait for input about {waiting:.0%} of every step"]
    if run.simulated:
        evidence.append("measured against simulated CPU devices: GPUs consume faster, so they "
                        "would wait longer")
    return [Finding(
        code=f"smoke.{run.layer}.input-bound", severity=Severity.WARNING,
        title=f"{label}: the input pipeline cannot feed the devices ({supply:,.0f} samples/s "
              f"delivered, {demand:,.0f} consumed)",
        evidence=evidence, fix=INPUT_FIX, links=[INPUT_GUIDE],
    )]
