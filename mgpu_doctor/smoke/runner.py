"""Supervise the smoke worker: live results, hangs, crashes, Ctrl-C, and restarts.

One worker child (``child_scripts/smoke_worker.py``) imports TensorFlow once and forks a fresh
child per run, so a run that crashes or raises costs nothing to the others. A run that hangs
takes the worker down with it (``run_child`` kills the whole process group after collecting
the stacks); the runner then starts a new worker for the runs that are left.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from mgpu_doctor.model.smoke_runs import SmokeRun, SmokeSpec
from mgpu_doctor.process.childproc import ChildOutcome, run_child, run_folder
from mgpu_doctor.process.interpreter import CHILD_SCRIPTS
from mgpu_doctor.record import record, replace
from mgpu_doctor.smoke.measure import failed_run, run_from_child
from mgpu_doctor.smoke.request import DEFAULT_STALL_TIMEOUT_S

WORKER_SCRIPT = CHILD_SCRIPTS / "smoke_worker.py"
JAX_WORKER_SCRIPT = CHILD_SCRIPTS / "smoke_worker_jax.py"  # Keras 3 on JAX (`smoke --backend jax`)
STARTUP_TIMEOUT_S = 180.0  # importing TensorFlow before the first heartbeat
PER_RUN_BUDGET_S = 600.0  # backstop only: stalls are caught by the heartbeat much sooner

RunCallback = Callable[[SmokeRun], None]
StartCallback = Callable[[SmokeSpec], None]


@record
class SuiteResult:
    """Every run that finished (in plan order), and how the suite itself went."""

    runs: list[SmokeRun]
    interrupted: bool
    wall_s: float
    workers: int  # worker processes started (1 unless a hang or a dead worker forced more)


def run_suite(
    specs: Sequence[SmokeSpec],
    *,
    python: str,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    env: dict[str, str] | None = None,
    on_start: StartCallback | None = None,
    on_run: RunCallback | None = None,
    worker: Path = WORKER_SCRIPT,
) -> SuiteResult:
    """Run every spec; ``on_run`` sees each run as soon as it is known (for ``--results``)."""
    start = time.monotonic()
    done: dict[int, SmokeRun] = {}
    remaining = list(specs)
    workers = 0
    interrupted = False
    retried: dict[int, str] = {}  # runs whose worker died by a signal under them once

    def record(run: SmokeRun, spec: SmokeSpec) -> None:
        if spec.index in retried and not run.retried_after:
            run = replace(run, retried_after=retried[spec.index])
        done[spec.index] = run
        if on_run is not None:
            on_run(run)

    try:
        while remaining:
            workers += 1
            outcome, imported, started_at = _one_worker(
                remaining, python, stall_timeout_s, startup_timeout_s, env, on_start, record, worker)
            remaining = [s for s in remaining if s.index not in done]
            if not remaining:
                break
            victim = remaining[0]
            if not imported:  # TensorFlow (or Keras on JAX) did not come up: every run fails alike
                what = "TensorFlow was" if worker == WORKER_SCRIPT else "Keras and JAX were"
                why = f"the smoke worker {outcome.failure_summary()} before {what} imported"
                for spec in remaining:
                    record(failed_run(spec, "error", error_type="WorkerFailed", message=why,
                                      stacks=outcome.stacks, stderr_tail=outcome.stderr_tail), spec)
                break
            if outcome.signal_name and victim.index not in retried:
                # A signal from outside (a busy machine, the OOM killer) takes the worker down
                # too: one death proves nothing about the layer; a new worker tries it again.
                retried[victim.index] = f"died by {outcome.signal_name} (the smoke worker with it)"
                continue
            began = started_at.get(victim.index, time.monotonic() - outcome.duration_s)
            record(_blame(victim, outcome, time.monotonic() - began), victim)
            remaining = remaining[1:]
    except KeyboardInterrupt:
        interrupted = True
    runs = [done[s.index] for s in specs if s.index in done]
    return SuiteResult(runs=runs, interrupted=interrupted, wall_s=time.monotonic() - start,
                       workers=workers)


def _one_worker(
    specs: list[SmokeSpec],
    python: str,
    stall_timeout_s: float,
    startup_timeout_s: float,
    env: dict[str, str] | None,
    on_start: StartCallback | None,
    record: Callable[[SmokeRun, SmokeSpec], None],
    worker: Path = WORKER_SCRIPT,
) -> tuple[ChildOutcome, bool, dict[int, float]]:
    by_index = {s.index: s for s in specs}
    started_at: dict[int, float] = {}
    workdir = run_folder("smoke")
    try:
        (workdir / "specs.json").write_text(json.dumps([s.to_child() for s in specs]))
        lines = _LineReader(workdir / "runs.jsonl")
        beats = _LineReader(workdir / "heartbeat")

        def drain(_elapsed: float = 0.0) -> None:
            for data in lines.new_json():
                spec = by_index.get(data.get("index", -1))
                if spec is not None:
                    record(run_from_child(spec, data), spec)
            for line in beats.new_lines():
                if line.startswith("start "):
                    spec = by_index.get(int(line.split()[1]))
                    if spec is not None:
                        started_at[spec.index] = time.monotonic()
                        if on_start is not None:
                            on_start(spec)

        try:
            outcome = run_child(
                [python, str(worker), str(workdir / "specs.json"), str(workdir)],
                timeout_s=startup_timeout_s + PER_RUN_BUDGET_S * len(specs),
                stall_timeout_s=stall_timeout_s, startup_timeout_s=startup_timeout_s,
                env=env, workdir=workdir, on_tick=drain,
            )
        finally:
            drain()  # also on Ctrl-C: the runs that finished are kept
        return outcome, "imported" in beats.seen, started_at
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _blame(spec: SmokeSpec, outcome: ChildOutcome, ran_for: float) -> SmokeRun:
    """The run that was in flight when the worker stopped (``ran_for``: since it started)."""
    if outcome.timed_out or outcome.stalled:
        return failed_run(spec, "hang", message=f"no progress: the worker {outcome.failure_summary()}",
                          stacks=outcome.stacks, stderr_tail=outcome.stderr_tail,
                          duration_s=ran_for)
    if outcome.signal_name:
        return failed_run(spec, "crash", signal=outcome.signal_name, message=outcome.failure_summary(),
                          stderr_tail=outcome.stderr_tail, duration_s=ran_for)
    return failed_run(spec, "error", error_type="WorkerFailed",
                      message=f"the smoke worker {outcome.failure_summary()}",
                      stderr_tail=outcome.stderr_tail, duration_s=ran_for)


class _LineReader:
    """Reads the complete lines appended to a file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.seen: list[str] = []

    def new_lines(self) -> list[str]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        new = chunk[: end + 1].decode("utf-8", "replace").splitlines()
        self.seen.extend(new)
        return new

    def new_json(self) -> list[dict]:
        out = []
        for line in self.new_lines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                out.append(data)
        return out
