"""Input-bound detection (pure): can the input pipeline feed the devices?

The child (child_scripts/_input_probe.py) times the run's `tf.data` pipeline alone, as given and
bounded by time (nothing training), and the same training step on the N devices fed from one
batch kept in memory (no input cost), in two rounds. When the pipeline delivers fewer samples per
second than the devices consume, every step waits for input and more devices cannot make the
training faster. On simulated CPU devices the finding still holds: GPUs consume faster than the
CPU, so a pipeline too slow for the simulation is too slow for them.

Both rates move with the machine's load (on simulated devices the pipeline and the step share the
same CPUs), so a shortfall counts only well above that noise: both rounds must fall short by more
than MIN_SHORTFALL and by more than NOISE_FACTOR times the rounds' spread (the difference of their
headrooms). A report written before the rounds, with one measurement, is held to MIN_SHORTFALL.
"""

from __future__ import annotations

from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.smoke.guides import INPUT_GUIDE
from mgpu_doctor.smoke.plan import USER_MODEL

# The pipeline must deliver at least what the devices consume; below, the devices idle.
FEEDS = 1.0
# A shortfall smaller than this is not reported: one measurement of healthy stock runs fell short by
# 1-12 % on a loaded 2-core machine, and one round against the next moved by up to 2x there
# (docs/smoke.md "Input-bound").
MIN_SHORTFALL = 0.25
NOISE_FACTOR = 2.0  # a shortfall must also exceed this many times the rounds' spread
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


def headrooms(run: SmokeRun) -> list[float]:
    """Each round's headroom; the one measurement of a report written before the rounds."""
    if run.input_rounds:
        return [h for h in (r.headroom for r in run.input_rounds) if h is not None]
    ratio = headroom(run)
    return [ratio] if ratio is not None else []


def shortfall_threshold(ratios: list[float]) -> float:
    """How far below FEEDS every round must fall to count: MIN_SHORTFALL, or NOISE_FACTOR times
    the rounds' spread where the rounds disagree more."""
    spread = max(ratios) - min(ratios) if len(ratios) > 1 else 0.0
    return max(MIN_SHORTFALL, NOISE_FACTOR * spread)


def input_bound(run: SmokeRun) -> bool:
    """Every round falls short of feeding the devices by more than the threshold."""
    ratios = headrooms(run)
    if run.status != "ok" or not ratios:
        return False
    return all(r < FEEDS - shortfall_threshold(ratios) for r in ratios)


def input_rates(run: SmokeRun) -> list[str]:
    """The probe's measurements, for any run that has them."""
    if run.input_samples_per_s is None or run.compute_samples_per_s is None:
        return []
    where = (f"{run.devices} simulated CPU devices" if run.simulated else f"{run.devices} GPU(s)")
    lines = [f"input pipeline alone (nothing training): {run.input_samples_per_s:,.0f} samples/s",
             f"training step on {where} fed from memory: {run.compute_samples_per_s:,.0f} samples/s"]
    if run.samples_per_s is not None and run.layer == USER_MODEL:  # the smoke trains on a cut of it
        lines.append(f"the smoke's training fed by the first {run.samples:,} samples of the pipeline: "
                     f"{run.samples_per_s:,.0f} samples/s")
    elif run.samples_per_s is not None:
        lines.append(f"training fed by the pipeline: {run.samples_per_s:,.0f} samples/s")
    ratios = [r.headroom for r in run.input_rounds if r.headroom is not None]
    if len(ratios) > 1:
        shown = ", ".join(f"{r:.2f}x" for r in ratios)
        short = min(ratios) < FEEDS
        rule = f" (a shortfall counts beyond {shortfall_threshold(ratios):.0%})" if short else ""
        lines.append(f"pipeline over consumption in {len(ratios)} rounds: {shown}{rule}")
    ended = [r for r in run.input_rounds if r.dataset_batches is not None]
    if ended:
        lines.append(f"the dataset ended after {ended[0].dataset_batches} batch(es), before the probe's "
                     f"{ended[0].seconds:.1f} s were up: measured on repeated (dataset.repeat())")
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
