"""`mgpu-doctor smoke`: train tiny models per layer type on 1 and N devices, report what broke."""

from __future__ import annotations

import argparse
import os
from typing import Any

from mgpu_doctor.cli.common import emit, progress_on_stderr
from mgpu_doctor.cli.options import (
    add_level_option,
    add_matrix_option,
    add_model_options,
    add_output_options,
    add_python_option,
    add_redact_option,
    add_smoke_options,
    add_training_options,
    interpreter_from,
    level_from,
    matrix_dirs,
    model_request,
    output_options,
    smoke_request,
    training_profile,
)
from mgpu_doctor.cli.output import OutputUnwritable
from mgpu_doctor.model.multiworker import KERAS_CHOICES
from mgpu_doctor.process import interrupts
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.plan import SMOKE_LEVELS


def add_multiworker_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("multi-worker smoke (MultiWorkerMirroredStrategy)")
    group.add_argument("--workers", type=int, metavar="K",
                       help="train with K worker processes on this host (CPU, TF_CONFIG on free "
                            "127.0.0.1 ports) instead of the single-host smoke; with --level long "
                            "also the resume test: BackupAndRestore, worker 1 killed in epoch 2, "
                            "the job restarted (3 more jobs of K workers)")
    group.add_argument("--tf-config", metavar="JSON|@FILE",
                       help="run this node's one worker of a cluster with this TF_CONFIG (default "
                            "under a scheduler: $TF_CONFIG when it is set)")
    group.add_argument("--keras", choices=KERAS_CHOICES, default="env",
                       help="Keras for the workers: env (tf.keras as TF_USE_LEGACY_KERAS here says, "
                            "default), default (TensorFlow's default, Keras 3 since TF 2.16), "
                            "tf-keras (TF_USE_LEGACY_KERAS=1), both (default, then tf-keras)")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "smoke", help="train tiny models on 1 and N devices and report what breaks",
        description="Train tiny Keras models per layer type on 1 and N devices "
                    "(MirroredStrategy), each run isolated in a child process, and report hangs, "
                    "crashes, NaNs, leaks, 1-vs-N disagreement and poor scaling. With --workers K "
                    "or --tf-config (or $TF_CONFIG): the same with MultiWorkerMirroredStrategy.")
    add_level_option(p, SMOKE_LEVELS)
    add_smoke_options(p)
    add_multiworker_options(p)
    add_training_options(p)
    add_model_options(p)
    add_matrix_option(p)
    add_python_option(p)
    add_redact_option(p)
    add_output_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, nvml_module: Any = None) -> int:
    # Imported here: `check` shares this module and need not pay for the multi-worker code.
    from mgpu_doctor.cli.smoke_workers import plan_from
    from mgpu_doctor.smoke_pipeline import SmokeCommand, run_smoke

    request = smoke_request(args, level_from(args))
    if request.options.user_model and args.layers is None:  # the stock layers only where --layers names them
        request = replace(request, options=replace(request.options, stock_layers=False))
    training = training_profile(args)
    # TF_CONFIG is validated before anything starts; --level long adds the multi-worker resume test
    multiworker = plan_from(args, os.environ, request.options.level)
    interpreter = interpreter_from(args) or Interpreter.current()
    output = output_options(args)
    command = SmokeCommand(request, training, interpreter, matrix_dirs(args), multiworker,
                           model=model_request(args), nvml_module=nvml_module)
    with progress_on_stderr() as progress:
        done = run_smoke(command, progress)
    return results_written(done.results_failure, emit(done.report, output, done.interrupted))


def results_written(failure: str, code: int) -> int:
    """``code``, unless the ``--results`` file stopped taking lines (``failure`` says why): then exit 2
    as for an ``-o`` or ``--junit`` file that cannot be written (after the report, which holds every run)."""
    if not failure or interrupts.received() is not None:
        return code
    raise OutputUnwritable(f"{failure} (the runs went on: their results are in the report)")
