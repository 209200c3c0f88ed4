"""Plan and run the multi-worker smoke trainings: per layer (and variant) and per Keras.

``local`` mode starts K workers on this host (a fresh loopback cluster per run); ``task`` mode
starts this node's one worker with the scheduler's TF_CONFIG, once per planned run, so every
node running the same command meets its peers run after run. After the trainings, the resume
tests the level plans (``--level long``, local mode only): three jobs each (``resume.py``),
each after its layer's training with the same Keras passed (a training that fails fails the
resume test's reference job alike: it is not run again).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from mgpu_doctor.model.multiworker import MultiWorkerRun
from mgpu_doctor.multiworker.findings import multiworker_run, resume_run, training_failed
from mgpu_doctor.multiworker.launcher import TIMEOUT_S, run_local_workers, run_workers
from mgpu_doctor.multiworker.resume import run_local_resume
from mgpu_doctor.multiworker.tf_config import TfConfig
from mgpu_doctor.process.grpc_proxy import proxy_note
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import record, replace
from mgpu_doctor.smoke.layers import variants
from mgpu_doctor.smoke.plan import EVERY_LAYER, LEVELS

# What TF_USE_LEGACY_KERAS becomes for each --keras choice (None: left as the environment has it).
LEGACY_KERAS: dict[str, bool | None] = {"env": None, "default": False, "tf-keras": True}
DEFAULT_LAYERS = ("dense",)  # each run costs K TensorFlow imports: more layers only when asked


@record
class MultiWorkerPlan:
    """``workers``: tasks in the cluster; ``task``: this node's TF_CONFIG (task mode) or None."""

    workers: int
    layers: tuple[str, ...] = DEFAULT_LAYERS
    kerases: tuple[str, ...] = ("env",)
    task: TfConfig | None = None
    resume_layers: tuple[str, ...] = ()  # the layers of the resume test (local mode)

    @property
    def mode(self) -> str:
        return "local" if self.task is None else "task"

    def runs(self) -> list[tuple[str, str, str]]:
        """The trainings: (layer, variant, keras) in the order they run."""
        return [(layer, variant, keras) for layer in self.layers for variant in variants(layer)
                for keras in self.kerases]

    def resume_runs(self) -> list[tuple[str, str, str]]:
        """The resume tests, after the trainings: the layer's first variant (resuming is about the
        callback, not the layer), per Keras."""
        return [(layer, variants(layer)[0], keras) for layer in self.resume_layers for keras in self.kerases]

    def planned(self) -> int:
        return len(self.runs()) + len(self.resume_runs())


def resume_layers(level: str, layers: tuple[str, ...], local: bool) -> tuple[str, ...]:
    """The planned layers the level's resume scenario covers (`LEVELS`, the same table as the
    single-host smoke's); none under a scheduler's TF_CONFIG, where restarting the job is the
    scheduler's part."""
    wanted = LEVELS[level].resume_layers if level in LEVELS else ()
    if not local:
        return ()
    return layers if wanted == EVERY_LAYER else tuple(layer for layer in layers if layer in wanted)


def keras_choices(value: str) -> tuple[str, ...]:
    return ("default", "tf-keras") if value == "both" else (value,)


def run_plan(
    plan: MultiWorkerPlan,
    interpreter: Interpreter,
    *,
    stall_timeout_s: float,
    on_start: Callable[[int, str], None] | None = None,
    on_run: Callable[[MultiWorkerRun], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[list[MultiWorkerRun], bool]:
    """Every planned run; the second value says whether Ctrl-C cut the suite short."""
    runs: list[MultiWorkerRun] = []
    timeout_s = max(TIMEOUT_S, 3 * stall_timeout_s)
    addresses = ["127.0.0.1:0"] if plan.task is None else \
        [address for hosts in plan.task.cluster.values() for address in hosts]
    proxy = proxy_note({**os.environ, **(extra_env or {})}, addresses)
    trainings = len(plan.runs())
    try:
        for i, (layer, variant, keras) in enumerate(plan.runs()):
            if on_start is not None:
                on_start(i, f"{layer}{'-' + variant if variant else ''} on {plan.workers} workers"
                            + ("" if keras == "env" else f" ({keras})"))
            legacy = LEGACY_KERAS[keras]
            if plan.task is None:
                result = run_local_workers(interpreter, plan.workers, layer=layer, variant=variant,
                                           legacy_keras=legacy, timeout_s=timeout_s,
                                           stall_timeout_s=stall_timeout_s, extra_env=extra_env,
                                           on_progress=on_progress)
            else:
                result = run_workers(interpreter, [plan.task], layer=layer, variant=variant,
                                     legacy_keras=legacy, cpu_only=False, timeout_s=timeout_s,
                                     stall_timeout_s=stall_timeout_s, extra_env=extra_env,
                                     on_progress=on_progress)
            run = replace(multiworker_run(result, layer=layer, variant=variant, workers=plan.workers,
                                          mode=plan.mode, keras=keras,
                                          tf_config=plan.task.to_json() if plan.task is not None else ""),
                          proxy=proxy)
            runs.append(run)
            if on_run is not None:
                on_run(run)
        for i, (layer, variant, keras) in enumerate(plan.resume_runs()):
            if training_failed(runs, layer, variant, keras):
                continue
            if on_start is not None:
                on_start(trainings + i, f"resume test of {layer}{'-' + variant if variant else ''} on "
                         f"{plan.workers} workers" + ("" if keras == "env" else f" ({keras})")
                         + ": 3 jobs, one worker killed")
            jobs = run_local_resume(interpreter, plan.workers, layer=layer, variant=variant,
                                    legacy_keras=LEGACY_KERAS[keras], timeout_s=timeout_s,
                                    stall_timeout_s=stall_timeout_s, extra_env=extra_env,
                                    on_progress=on_progress)
            run = replace(resume_run(jobs, layer=layer, variant=variant, workers=plan.workers, keras=keras),
                          proxy=proxy)
            runs.append(run)
            if on_run is not None:
                on_run(run)
    except KeyboardInterrupt:
        return runs, True
    return runs, False

