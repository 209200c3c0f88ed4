"""The smoke trainings on Keras 3's JAX backend (`smoke --backend jax`, or KERAS_BACKEND=jax).

The same plan, runner and judgments as the TensorFlow smoke; another worker
(``child_scripts/smoke_worker_jax.py``) trains the stock models with
``keras.distribution.DataParallel``. Simulated devices are JAX's host platform split with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``; on GPUs the worker runs without
preallocation, so the memory a run holds is the memory it uses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from mgpu_doctor.errors import BadInput
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus
from mgpu_doctor.model.smoke_runs import SmokeSpec
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable, interpreter_broken
from mgpu_doctor.probes.jax_view import gather_jax, jax_installed
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.judged import SmokeSection, with_matrix_verdicts
from mgpu_doctor.smoke.layers import SMOKE_LAYERS
from mgpu_doctor.smoke.plan import PlanError, SmokeOptions, batch_splits, plan_runs
from mgpu_doctor.smoke.progress import ResultsFile, level_note, run_with_progress
from mgpu_doctor.smoke.rules import batch_split_outcomes, smoke_outcomes
from mgpu_doctor.smoke.runner import JAX_WORKER_SCRIPT

STRATEGY = "keras_data_parallel"  # the matrix's word for keras.distribution.DataParallel
SCENARIOS = ("even", "uneven_final_batch", "checkpoint")  # no BackupAndRestore resume on JAX


def jax_gpus(snapshot: Snapshot) -> int:
    jax = snapshot.jax
    if isinstance(jax, Unavailable) or isinstance(jax.devices, Unavailable):
        return 0
    return sum(1 for d in jax.devices if d.platform in ("gpu", "cuda"))


def worker_env(specs: list[SmokeSpec], environ: Mapping[str, str]) -> dict[str, str]:
    """The user's environment, set for Keras on JAX and for the devices the runs use."""
    env = {**environ, "KERAS_BACKEND": "jax"}
    if specs and specs[0].device_kind == "cpu-virtual":
        count = max(s.virtual_devices or s.devices for s in specs)
        flags = [f for f in env.get("XLA_FLAGS", "").split()
                 if not f.startswith("--xla_force_host_platform_device_count")]
        env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={count}"])
        env["JAX_PLATFORMS"] = "cpu"
    else:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return env


def run_jax_section(
    snapshot: Snapshot,
    options: SmokeOptions,
    interpreter: Interpreter,
    *,
    stall_timeout_s: float,
    results_file: ResultsFile | None = None,
    stream: TextIO | None = None,
    matrix_dirs: tuple[Path, ...] = (),
    environ: Mapping[str, str] | None = None,
) -> SmokeSection:
    """Plan and run the smoke suite on Keras 3's JAX backend; never raises on Ctrl-C."""
    environ = os.environ if environ is None else environ
    if interpreter_broken(snapshot.python):
        return SmokeSection(
            outcomes=[_skipped("the diagnosed Python does not work (`interpreter` check)")])
    if jax_installed(snapshot.packages) is False:
        return SmokeSection(outcomes=[_skipped(f"--backend jax: JAX is not installed for "
                                                       f"{interpreter.executable}")])
    packages = snapshot.packages
    keras = None if isinstance(packages, Unavailable) else packages.versions.get("keras")
    if not isinstance(packages, Unavailable) and (keras is None or not keras.split(".")[0].isdecimal()
                                                   or int(keras.split(".")[0]) < 3):
        return SmokeSection(outcomes=[_skipped("--backend jax needs Keras 3, installed: "
                                                       f"{keras or 'none'}")])
    nvml = snapshot.nvml
    if isinstance(snapshot.jax, Unavailable) and not isinstance(nvml, Unavailable) and nvml.gpus:
        snapshot = replace(snapshot, jax=gather_jax(interpreter, packages))
    if isinstance(snapshot.jax, Unavailable) and snapshot.jax.reason == "failed":
        why = snapshot.jax.detail.splitlines()[0] if snapshot.jax.detail else snapshot.jax.cause
        return SmokeSection(outcomes=[_skipped(f"JAX does not import: {why}")], snapshot=snapshot)
    options = replace(options, scenarios=tuple(s for s in options.scenarios if s in SCENARIOS))
    try:
        specs = [replace(s, index=i) for i, s in enumerate(
            s for s in plan_runs(options, jax_gpus(snapshot)) if not _sync_variant(s))]
        splits = batch_splits(options, jax_gpus(snapshot))
    except PlanError as exc:
        raise BadInput(str(exc)) from None
    runs, interrupted = run_with_progress(specs, interpreter, stall_timeout_s, stream, results_file,
                                     env=worker_env(specs, environ), worker=JAX_WORKER_SCRIPT)
    notes = [f"Smoke trainings on Keras 3's JAX backend (keras.distribution.DataParallel), "
             f"{len(specs)} run(s); no resume test (BackupAndRestore) and no synchronized "
             "BatchNormalization (TensorFlow's alone) on JAX."]
    if specs and specs[0].device_kind == "cpu-virtual":
        notes.append(f"Simulated on {specs[0].virtual_devices} JAX host devices "
                     "(--xla_force_host_platform_device_count; fewer than 2 GPUs seen by JAX): correctness "
                     "results hold, speed figures say nothing about GPUs.")
    notes.append(level_note(options.plan_level, len(specs)))
    if interrupted:
        notes.append(f"Interrupted: {len(runs)} of {len(specs)} smoke runs finished.")
    on_jax = replace(snapshot, env={**snapshot.env, "KERAS_BACKEND": "jax"})  # what the matrix matches
    outcomes = with_matrix_verdicts(smoke_outcomes(runs, stall_timeout_s), runs, on_jax, matrix_dirs,
                                            strategy=STRATEGY) + batch_split_outcomes(splits)
    return SmokeSection(outcomes=outcomes, runs=runs, notes=notes, interrupted=interrupted,
                                snapshot=snapshot)


def _sync_variant(spec: SmokeSpec) -> bool:
    """BatchNormalization(synchronized=True) is TensorFlow's alone (Keras 3 raises on JAX, where
    DataParallel's batch statistics are over the global batch anyway)."""
    return SMOKE_LAYERS[spec.layer].batch_statistics and spec.variant == "sync"


def _skipped(reason: str) -> CheckOutcome:
    return CheckOutcome("smoke", "Smoke trainings", CheckStatus.SKIPPED, skip_reason=reason)
