"""`mgpu-doctor smoke --workers K` / `--tf-config`: the multi-worker smoke (MultiWorkerMirroredStrategy).

Part of the `smoke` sub-command (its options and its run live in ``cli/smoke.py``); this module
decides whether a multi-worker run was asked for and validates TF_CONFIG before anything starts.
The runs and their report: :mod:`mgpu_doctor.smoke_pipeline`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.multiworker.suite import (
    DEFAULT_LAYERS,
    MultiWorkerPlan,
    keras_choices,
    resume_layers,
)
from mgpu_doctor.multiworker.tf_config import TfConfigError, check_addresses, parse_tf_config
from mgpu_doctor.process.inputs import InputError, read_text
from mgpu_doctor.smoke.plan import DEFAULT_LEVEL, PlanError, parse_layers

MWMS_TASK_TYPES = ("chief", "worker")
# Local multi-worker smoke: each worker is a process importing TensorFlow (about 0.6 GB each).
MAX_LOCAL_WORKERS = 32


def plan_from(
    args: argparse.Namespace, environ: Mapping[str, str], level: str = DEFAULT_LEVEL
) -> MultiWorkerPlan | None:
    """The multi-worker plan asked for, or None for the single-host smoke. Raises UsageError.

    ``level``: ``long`` adds the resume test (local mode) for the layers LEVELS names."""
    workers = getattr(args, "workers", None)
    text, source = getattr(args, "tf_config", None), "--tf-config"
    if workers is not None and text:
        raise UsageError("--workers K starts K workers on this host, --tf-config runs this node's one "
                         "task of a cluster: give one of them")
    if text is not None and not text.strip():
        raise UsageError("--tf-config is empty: give the cluster as JSON or @FILE (or leave the option "
                         "out for the single-host smoke)")
    if workers is None and not text:
        text = environ.get("TF_CONFIG", "")
        if not text.strip():
            return None
        source = "TF_CONFIG (from the environment; unset it for the single-host smoke)"
    flag = "--workers" if workers is not None else source.split(" ")[0]
    for name in ("gpus", "batch_sizes", "model_sizes", "leak_probe"):
        if getattr(args, name, None):
            raise UsageError(f"--{name.replace('_', '-')} applies to the single-host smoke, not with {flag}")
    try:
        layers = parse_layers(args.layers) if getattr(args, "layers", None) else DEFAULT_LAYERS
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    kerases = keras_choices(getattr(args, "keras", "env"))
    if workers is not None:
        if not 2 <= workers <= MAX_LOCAL_WORKERS:
            raise UsageError(f"--workers takes a number from 2 to {MAX_LOCAL_WORKERS} (each worker is a "
                             f"process importing TensorFlow on this host), got {workers}")
        return MultiWorkerPlan(workers, layers, kerases,
                               resume_layers=resume_layers(level, layers, local=True))
    assert text is not None
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = read_text(path, "a TF_CONFIG JSON file")
        except InputError as exc:
            raise UsageError(f"--tf-config: {exc}") from None
        except OSError as exc:
            raise UsageError(f"--tf-config: cannot read {path}: {exc.strerror or exc}") from None
        source = f"--tf-config @{path}"
    try:
        config = parse_tf_config(text, source)
        if config.task_type not in MWMS_TASK_TYPES:
            raise TfConfigError(f"{source}: task.type {config.task_type!r}: MultiWorkerMirroredStrategy "
                                "runs chief and worker tasks only")
        check_addresses(config)
    except TfConfigError as exc:
        raise UsageError(str(exc)) from None
    return MultiWorkerPlan(config.num_workers, layers, kerases, task=config,
                           resume_layers=resume_layers(level, layers, local=False))
