"""`mgpu-doctor hang [PID ...]`: a running job read while it hangs, and the verdict on it."""

from __future__ import annotations

import argparse
import math
from typing import Any

from mgpu_doctor.cli.common import emit, progress_on_stderr
from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.cli.options import (
    add_matrix_option,
    add_output_options,
    add_redact_option,
    matrix_dirs,
    output_options,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "hang", help="read a running job's stacks and say what each process waits for (py-spy)",
        description="Read every process of a running (hung) job from outside: its Python stacks "
        "(py-spy, `pip install 'mgpu-doctor[hang]'`), its state, whether its CPU time moves and its GPUs; "
        "say what each waits for (a collective, the cluster start-up, the input pipeline, checkpoint "
        "I/O, a lock, compute), which process is the odd one out, and the known hangs its stacks "
        "match. Each process is paused only for the milliseconds of one dump.")
    add_hang_options(p)
    add_matrix_option(p)
    add_output_options(p)
    add_redact_option(p)
    p.set_defaults(run=run)


def add_hang_options(p: argparse.ArgumentParser, pids: bool = True) -> None:
    if pids:
        p.add_argument("pids", nargs="*", type=pid_argument, metavar="PID",
                       help="the job's processes (default: the Python processes that hold GPUs or carry "
                            "a TF_CONFIG)")
    p.add_argument("--slurm-job", metavar="ID", default="",
                   help="the processes of this Slurm job on this node (`scontrol listpids`; on every node: "
                        "`srun --overlap --jobid ID --ntasks-per-node=1 mgpu-doctor hang --slurm-job ID`)")
    p.add_argument("--native", action="store_true",
                   help="native (C/C++) frames too: where TensorFlow's runtime waits (seconds per process)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="seconds over which CPU time is watched (default: 1)")


def pid_argument(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return int(text)


def hang_request(args: argparse.Namespace, pids: list[int] | None = None) -> Any:
    from mgpu_doctor.hang.section import HangRequest

    interval = args.interval
    if not (math.isfinite(interval) and 0.1 <= interval <= 60):
        raise UsageError(f"--interval must be between 0.1 and 60 seconds, got {interval:g}")
    pids = list(getattr(args, "pids", []) or []) if pids is None else pids
    if pids and args.slurm_job:
        raise UsageError("give PIDs or --slurm-job, not both")
    return HangRequest(tuple(pids), args.slurm_job, args.native, float(interval))


def run(args: argparse.Namespace) -> int:
    from mgpu_doctor.diagnose import hang

    request = hang_request(args)
    dirs = matrix_dirs(args)
    output = output_options(args)
    with progress_on_stderr() as progress:
        report = hang(request, dirs, redact=args.redact, progress=progress)
    return emit(report, output)
