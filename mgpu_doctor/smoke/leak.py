"""The leak probe of the smoke suite: does memory grow with every fit, predict or evaluate call?

One stock smoke model (dense, else the first planned layer) on 1 and on N devices calls
``model.fit`` (one epoch) ``cycles`` times, then ``model.predict``, then ``model.evaluate``, in
one process (``child_scripts/_smoke_leak.py``), measuring the host memory (anonymous RSS) and, on
GPUs, the memory TensorFlow's allocator holds after every call. Here (pure): a line fitted per
phase over the cycles after a warm-up, the ``smoke.LAYER.leak`` finding, and the matrix's leak
entries that fit what the probe exercised: "known leak, reproduced here", "new", or "not
reproduced here".

The threshold, from clean probes on this project's 2-core machine shared with other jobs
(TensorFlow 2.21, Keras 3, the dense model on 1 and 2 virtual CPU devices, 12 calls per phase,
a full garbage collection before each measurement): after the first two calls the anonymous
host memory of a clean run creeps by 0.006 to 0.07 MiB per call, and single calls dip by up to
1.5 MiB. A slope counts as a leak when it is above ``HOST_FLOOR_MB`` per call (7 times the
largest clean creep; about 0.5 GiB per 1,000 calls, a leak that ends a long job), above
``HOST_RELATIVE`` of the phase's memory (allocator jitter grows with the heap, so a process
holding gigabytes needs a larger floor), and above ``SIGNIFICANCE`` standard errors of the fitted
slope (steady growth, not one jump). The injected test leak (8 MiB per call) measures 8.2 to 8.4
MiB per call with a standard error of 0.05. GPU memory is the allocator's own count of bytes in
use, without jitter from Python: ``GPU_FLOOR_MB`` (not measured on a GPU here).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import KnownIssue, known_issue_line
from mgpu_doctor.matrix.match import Assessment, Verdict, assess
from mgpu_doctor.model.findings import CheckOutcome, Finding, Severity, status_for
from mgpu_doctor.model.smoke_runs import LEAK_SCENARIO, LeakCycle, SmokeRun
from mgpu_doctor.record import record, replace
from mgpu_doctor.smoke.known_issues import REPORT_COMMAND, run_environment

PHASES = ("fit", "predict", "evaluate")
WARMUP_CYCLES = 2  # the first calls of each phase trace and build: left out of the line
# The matrix's words for what each phase exercises (`usage` in known issues).
PHASE_USAGE: dict[str, tuple[str, ...]] = {
    "fit": ("fit_in_loop",),
    "predict": ("predict_in_loop", "predict_evaluate"),
    "evaluate": ("predict_in_loop", "predict_evaluate"),
}
HOST_FLOOR_MB = 0.5  # MiB per call
HOST_RELATIVE = 0.001  # of the phase's median host memory, per call
GPU_FLOOR_MB = 1.0  # MiB per call
SIGNIFICANCE = 3.0  # standard errors of the slope
LEAK_GUIDE = "https://www.tensorflow.org/guide/function#controlling_retracing"

# The codes of the leak lookup besides the smoke lookup's own (smoke.known-issue.ID: a known leak
# reproduced here; smoke.not-in-matrix.RUN: a new one).
CODES = ("smoke.not-reproduced.ID",)


@record
class Growth:
    """One phase's memory (host or GPU) after each call, and the line fitted through it."""

    phase: str
    memory: str  # "host memory" (anonymous RSS) or "GPU memory"
    values: tuple[float, ...]  # MiB after every call of the phase, warm-up included
    slope_mb: float | None  # MiB per call over the cycles after the warm-up; None: too few
    stderr_mb: float | None
    threshold_mb: float

    @property
    def leaks(self) -> bool:
        return (self.slope_mb is not None and self.stderr_mb is not None
                and self.slope_mb > self.threshold_mb and self.slope_mb > SIGNIFICANCE * self.stderr_mb)

    def describe(self) -> str:
        values = ", ".join(f"{v:.1f}" for v in self.values)
        what = f"{self.memory}{' (anonymous RSS)' if self.memory == 'host memory' else ''} after each call"
        if self.slope_mb is None:
            return f"{self.phase}: {what} (MiB): {values}; too few calls to fit a line"
        return (f"{self.phase}: {what} (MiB): {values}; "
                f"{self.slope_mb:+.3f} MiB per call over calls {WARMUP_CYCLES + 1}-{len(self.values)} "
                f"(standard error {self.stderr_mb or 0.0:.3f}, threshold {self.threshold_mb:.2f})")


def line_fit(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Least-squares slope per step and its standard error; (None, None) with fewer than 4 points."""
    n = len(values)
    if n < 4:
        return None, None
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    slope = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(values)) / sxx
    residual = sum((y - mean_y - slope * (i - mean_x)) ** 2 for i, y in enumerate(values))
    return slope, math.sqrt(residual / (n - 2) / sxx)


def growths(cycles: Sequence[LeakCycle]) -> list[Growth]:
    """Per phase (in probe order): the host memory, and the GPU memory where it was measured."""
    out = []
    for phase in PHASES:
        calls = sorted((c for c in cycles if c.phase == phase), key=lambda c: c.cycle)
        series = (("host memory", [c.rss_anon_mb for c in calls]), ("GPU memory", [c.gpu_mb for c in calls]))
        for memory, values in series:
            known = tuple(v for v in values if v is not None)
            if not known or len(known) != len(values):
                continue
            slope, stderr = line_fit(known[WARMUP_CYCLES:])
            floor = (max(HOST_FLOOR_MB, HOST_RELATIVE * statistics.median(known)) if memory == "host memory"
                     else GPU_FLOOR_MB)
            out.append(Growth(phase, memory, known, slope, stderr, floor))
    return out


def leaking(run: SmokeRun) -> list[Growth]:
    return [g for g in growths(run.leak_cycles) if g.leaks]


def gpu_note(run: SmokeRun) -> str:
    if any(c.gpu_mb is not None for c in run.leak_cycles):
        return ""
    if run.simulated:
        return "GPU memory: not measured (simulated CPU devices)"
    return ("GPU memory: not measured (tf.config.experimental.get_memory_info is missing in this "
            "TensorFlow, before 2.5, or failed)")


def _rate(g: Growth) -> str:
    assert g.slope_mb is not None
    return (f"{g.memory} grows by {g.slope_mb:.2f} MiB per {g.phase} call "
            f"({g.slope_mb * 1000 / 1024:.1f} GiB per 1,000 calls)")


def leak_findings(run: SmokeRun, label: str) -> list[Finding]:
    """The probe's verdict on one run that finished: ``smoke.LAYER.leak``, or ok with the slopes."""
    measured = growths(run.leak_cycles)
    evidence = [g.describe() for g in measured] + [n for n in (gpu_note(run),) if n]
    leaks = [g for g in measured if g.leaks]
    calls = max((c.cycle + 1 for c in run.leak_cycles), default=0)
    seconds = sum(c.seconds for c in run.leak_cycles)
    if leaks:
        return [Finding(
            code=f"smoke.{run.layer}.leak", severity=Severity.WARNING,
            title=f"{label}: " + "; ".join(_rate(g) for g in leaks),
            evidence=evidence + [f"leaked in: {', '.join(dict.fromkeys(g.phase for g in leaks))}; "
                                 f"{calls} calls per phase, the first {WARMUP_CYCLES} left out (tracing)"],
            fix="Memory that grows with every call ends a long job: reuse one model and one "
                "tf.function instead of creating them in the loop, call the model directly "
                "(`model(x, training=False)`) or `predict_on_batch` for small repeated inputs, keep "
                "input shapes fixed so nothing retraces, and compare the known leaks of this "
                "TensorFlow/Keras version (`mgpu-doctor check`).",
            links=[LEAK_GUIDE],
        )]
    if not measured:
        return [Finding(code=f"smoke.{run.layer}.ok", severity=Severity.OK,
                        title=f"{calls} calls each of fit, predict and evaluate; memory not measured",
                        evidence=["host memory: /proc/self/statm could not be read"]
                        + [n for n in (gpu_note(run),) if n])]
    return [Finding(
        code=f"smoke.{run.layer}.ok", severity=Severity.OK,
        title=f"no memory growth over {calls} calls each of fit, predict and evaluate ({seconds:.0f} s)",
        evidence=evidence,
    )]


# ----------------------------------------------------------------------------- the matrix

def _usage(phases: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(word for p in phases for word in PHASE_USAGE.get(p, ())))


def _matching(issues: Sequence[KnownIssue], env: Environment) -> list[Assessment]:
    return [a for a in (assess(i, env) for i in issues if i.symptom == "leak")
            if a.verdict is Verdict.MATCHES]


def leak_verdicts(issues: Sequence[KnownIssue], environment: Environment, run: SmokeRun,
                  strategy: str = "mirrored") -> list[Finding]:
    """The matrix's leak entries against one probe run: a leak found is a known one reproduced
    here (the entries that fit the phases that leaked) or new; a leak entry that fits what the
    probe exercised and did not show is "not reproduced here" (info)."""
    if run.scenario != LEAK_SCENARIO or run.status != "ok" or not run.leak_cycles:
        return []
    exercised = tuple(p for p in PHASES if any(c.phase == p for c in run.leak_cycles))
    calls = max((c.cycle + 1 for c in run.leak_cycles), default=0)
    leaked = tuple(dict.fromkeys(g.phase for g in leaking(run)))
    # the probe's batches are full: the entries of an uneven final batch do not fit it
    base = replace(run_environment(environment, run, strategy), scenario="even")
    kind = "simulated CPU" if run.simulated else "GPU"
    what = f"{run.layer_variant} on {run.devices} {kind} device(s)"
    findings: list[Finding] = []
    reproduced = _matching(issues, replace(base, usage=_usage(leaked))) if leaked else []
    for a in reproduced:
        issue = a.issue
        findings.append(Finding(
            code=f"smoke.known-issue.{issue.id}", severity=Severity.WARNING,
            title=f"Leak probe {what}: {', '.join(leaked)} leaked; known leak {issue.id}, reproduced "
                  f"here: {issue.title}",
            evidence=[known_issue_line(issue.id), *(f"matches: {line}" for line in a.agrees),
                      f"symptom: {issue.symptom}; confidence: {issue.confidence}"
                      + (f"; fixed in {issue.fixed_in}" if issue.fixed_in else "")],
            fix=issue.workaround, links=[s.url for s in issue.sources if s.url],
        ))
    if leaked and not reproduced:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(base.versions.items()))
        findings.append(Finding(
            code=f"smoke.not-in-matrix.{_run_word(run)}",
            severity=Severity.WARNING,
            title=f"Leak probe {what}: {', '.join(leaked)} leaked; a new leak, not in the matrix of "
                  "known issues",
            evidence=[f"versions: {versions or 'not known'}",
                      f"no known issue with symptom leak and usage {', '.join(_usage(leaked))} "
                      "(or none named) matches this run"],
            fix=f"Run `{REPORT_COMMAND}` and attach mgpu-report.md to a new issue (TensorFlow or "
                "Keras): it holds the versions, the devices and the memory after every call.",
        ))
    shown = {a.issue.id for a in reproduced}
    for a in _matching(issues, replace(base, usage=_usage(exercised))):
        issue = a.issue
        if issue.id in shown:
            continue
        usage = ", ".join(issue.conditions.usage) or "plain model.fit / predict / evaluate"
        findings.append(Finding(
            code=f"smoke.not-reproduced.{issue.id}", severity=Severity.INFO,
            title=f"Leak probe {what}: known leak {issue.id} not reproduced here ({usage}): {issue.title}",
            evidence=[known_issue_line(issue.id), *(f"matches: {line}" for line in a.agrees),
                      f"the probe called {', '.join(exercised)} {calls} times each without a growth "
                      "above the threshold"],
            fix="Nothing to do for this model; the entry may need a larger model, other input "
                "shapes or more calls than the probe's to show.",
            links=[s.url for s in issue.sources if s.url],
        ))
    return findings


def _run_word(run: SmokeRun) -> str:
    """The run in a code: "dense-2cpu-virtual-leak-probe"."""
    return f"{run.layer_variant}-{run.devices}{run.device_kind}-leak-probe"


def with_leak_verdicts(outcomes: list[CheckOutcome], runs: Sequence[SmokeRun],
                       issues: Sequence[KnownIssue], environment: Environment,
                       strategy: str = "mirrored") -> list[CheckOutcome]:
    """Each leak-probe run's outcome gains the matrix's verdict on its leak (or on its clean run)."""
    by_name = {run.name: run for run in runs if run.scenario == LEAK_SCENARIO}
    out = []
    for outcome in outcomes:
        run = by_name.get(outcome.name)
        extra = leak_verdicts(issues, environment, run, strategy) if run is not None else []
        if not extra:
            out.append(outcome)
            continue
        findings = sorted(outcome.findings + extra, key=lambda f: f.severity, reverse=True)
        out.append(replace(outcome, findings=findings, status=status_for(findings)))
    return out

