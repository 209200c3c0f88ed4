"""Start K MultiWorkerMirroredStrategy workers on this host and collect what each did.

Each worker is a child (``child_scripts/multiworker_worker.py``) run through
:func:`mgpu_doctor.process.childproc.run_child`: own process group, heartbeat, stall detection,
stacks, TERM/KILL ladder. Each worker ends in one of the smoke statuses (ok, hang, crash,
error, nan, diverged) or ``stopped``. When one worker fails, the others would wait for it in the next
collective until their stall timeout; the launcher stops them at once instead (their
``on_tick`` raises, which makes ``run_child`` kill their group).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from mgpu_doctor.model.multiworker import WorkerOutcome
from mgpu_doctor.multiworker.tf_config import TfConfig, check_addresses, local_cluster
from mgpu_doctor.process.childproc import ChildOutcome
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import field, record, replace
from mgpu_doctor.smoke.measure import MAX_TEXT, diverged

WORKER_SCRIPT = "multiworker_worker.py"
TIMEOUT_S = 300.0
STALL_TIMEOUT_S = 90.0
SUMMARY_CHARS = 160
# Test-only fault injection, read by the worker script: that task SIGKILLs itself at that step.
DIE_TASK_ENV = "MGPU_DOCTOR_TEST_DIE_TASK"
DIE_STEP_ENV = "MGPU_DOCTOR_TEST_DIE_AT_STEP"


@record
class MultiWorkerResult:
    """Every worker's outcome, and the final weights each reported (by task index)."""

    workers: list[WorkerOutcome]
    legacy_keras: bool | None  # None: TF_USE_LEGACY_KERAS as the environment had it
    duration_s: float
    weights: dict[int, list[float]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(w.status == "ok" for w in self.workers)

    def max_weight_difference(self) -> float | None:
        """Largest difference of a weight between the workers here; None unless each has weights.

        With one worker here (a task of a cluster) the worker's own all-gather is the comparison.
        """
        if len(self.workers) == 1:
            return self.workers[0].weight_spread
        vectors = [self.weights.get(w.task_index, []) for w in self.workers]
        if len(vectors) < 2 or not all(vectors) or len({len(v) for v in vectors}) > 1:
            return None
        return max(max(col) - min(col) for col in zip(*vectors, strict=True))


class _Stopped(Exception):
    """Raised in a worker's on_tick to make run_child kill it."""


def worker_env(base: Mapping[str, str], config: TfConfig, legacy_keras: bool | None,
               extra: Mapping[str, str] | None = None, cpu_only: bool = True) -> dict[str, str]:
    env = dict(base)
    env["TF_CONFIG"] = config.to_json()
    if cpu_only:
        env["CUDA_VISIBLE_DEVICES"] = "-1"  # many workers on one host share it: they train on CPU
    if legacy_keras is not None:
        env.pop("TF_USE_LEGACY_KERAS", None)
        if legacy_keras:
            env["TF_USE_LEGACY_KERAS"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra or {})
    return env


def run_local_workers(
    interpreter: Interpreter,
    count: int,
    *,
    layer: str = "dense",
    variant: str = "",
    legacy_keras: bool | None = False,
    timeout_s: float = TIMEOUT_S,
    stall_timeout_s: float = STALL_TIMEOUT_S,
    extra_env: Mapping[str, str] | None = None,
    on_progress: Callable[[str], None] | None = None,
    worker_args: Sequence[str] = (),
) -> MultiWorkerResult:
    """Train the layer's model with ``count`` workers on 127.0.0.1, on CPU, and report each.

    Every call is a fresh cluster on fresh ports (a restarted job too)."""
    configs = local_cluster(count)
    for config in configs:
        check_addresses(config)
    return run_workers(interpreter, configs, layer=layer, variant=variant, legacy_keras=legacy_keras,
                       cpu_only=True, timeout_s=timeout_s, stall_timeout_s=stall_timeout_s,
                       extra_env=extra_env, on_progress=on_progress, worker_args=worker_args)


def run_workers(
    interpreter: Interpreter,
    configs: list[TfConfig],
    *,
    layer: str = "dense",
    variant: str = "",
    legacy_keras: bool | None = None,
    cpu_only: bool = False,
    timeout_s: float = TIMEOUT_S,
    stall_timeout_s: float = STALL_TIMEOUT_S,
    extra_env: Mapping[str, str] | None = None,
    on_progress: Callable[[str], None] | None = None,
    worker_args: Sequence[str] = (),
) -> MultiWorkerResult:
    """One worker process per config (validated by the caller), side by side, on this host.

    Under a scheduler ``configs`` holds this node's one task; its peers run on the other nodes.
    ``worker_args``: options of the worker script (the resume test's ``--backup-dir``...).
    """
    count = len(configs)
    args = [layer, variant] if variant else [layer]
    args += list(worker_args)
    weights: dict[int, list[float]] = {}
    stop = threading.Event()
    failed_first: list[int] = []
    started = time.monotonic()

    def one(config: TfConfig) -> WorkerOutcome:
        def tick(elapsed: float) -> None:
            if stop.is_set():
                raise _Stopped
        env = worker_env(os.environ, config, legacy_keras, extra_env, cpu_only)
        begun = time.monotonic()
        try:
            outcome = interpreter.run_script(WORKER_SCRIPT, *args, timeout_s=timeout_s,
                                             stall_timeout_s=stall_timeout_s, env=env, on_tick=tick)
        except _Stopped:
            who = f"worker {failed_first[0]}" if failed_first else "another worker"
            return WorkerOutcome(config.task_index, "stopped",
                                 f"stopped by the launcher after {who} failed", task_type=config.task_type,
                                 duration_s=time.monotonic() - begun)
        worker = replace(worker_outcome(config.task_index, outcome), task_type=config.task_type)
        if isinstance(outcome.result, dict) and isinstance(outcome.result.get("weights"), list):
            weights[config.task_index] = [float(x) for x in outcome.result["weights"]]
        if worker.status != "ok" and not stop.is_set():
            failed_first.append(config.task_index)
            stop.set()
        return worker

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(one, c) for c in configs]
        try:
            while not all(f.done() for f in futures):
                time.sleep(0.2)
                if on_progress is not None:
                    on_progress(f"{count} worker(s) training {layer} "
                                f"({time.monotonic() - started:.0f} s)")
        except BaseException:  # Ctrl-C: every worker's group is killed before we go
            stop.set()
            raise
        workers = [f.result() for f in futures]
    return MultiWorkerResult(workers, legacy_keras, time.monotonic() - started, weights)


def worker_outcome(index: int, outcome: ChildOutcome) -> WorkerOutcome:
    """One worker's child outcome in the smoke statuses (ok hang crash error nan diverged)."""
    data = outcome.result if isinstance(outcome.result, dict) else {}
    losses = [_finite(x) for x in data.get("loss", [])] if isinstance(data.get("loss"), list) else []
    base = WorkerOutcome(
        index, "", "", phase=str(data.get("phase", "")), keras=_keras(data),
        tensorflow=str(data.get("tensorflow", "")), replicas=_int(data.get("replicas")),
        local_gpus=_int(data.get("local_gpus")), loss=losses,
        weights_finite=data.get("weights_finite") if isinstance(data.get("weights_finite"), bool) else None,
        weight_spread=_finite(data.get("weight_spread")),
        epochs_begun=[e for e in data.get("epochs_begun", []) if _int(e) is not None]
        if isinstance(data.get("epochs_begun"), list) else [],
        seconds={k: float(v) for k, v in dict(data.get("seconds", {})).items()},
        duration_s=outcome.duration_s, stacks=outcome.stacks[-MAX_TEXT:],
        stderr_tail=outcome.stderr_tail[-MAX_TEXT:],
    )
    if outcome.timed_out or outcome.stalled:
        return replace(base, status="hang", summary=outcome.failure_summary())
    if data.get("status") == "ok" and outcome.returncode == 0:
        trained = f"trained {data.get('steps')} steps"
        if any(v is None for v in losses) or base.weights_finite is False:
            return replace(base, status="nan", summary=f"{trained}; the loss or the weights became NaN/Inf")
        if diverged(losses):
            return replace(base, status="diverged", summary=f"{trained}; the loss blew up")
        return replace(base, status="ok", summary=trained)
    error = data.get("error")
    if isinstance(error, dict):
        message = str(error.get("message", "")).strip()
        short = " ".join(message.split())  # TensorFlow's messages span lines: one line, cut
        short = short if len(short) <= SUMMARY_CHARS else short[:SUMMARY_CHARS - 3] + "..."
        return replace(base, status="error", error_type=str(error.get("type", "")),
                       error_message=message[-MAX_TEXT:], summary=f"{error.get('type')}: {short}")
    if outcome.signal_name:
        return replace(base, status="crash", signal=outcome.signal_name, summary=outcome.failure_summary())
    return replace(base, status="error", error_type="WorkerFailed", summary=outcome.failure_summary())


def _keras(data: dict[str, object]) -> str:
    module = data.get("keras_module")
    version = data.get("keras_version")
    if not module:
        return ""
    return f"{module} {version}" if version and version != "unknown" else str(module)


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
