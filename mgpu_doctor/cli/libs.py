"""`mgpu-doctor libs`: per CUDA library, what TensorFlow was built for, what is in use, what the
driver supports; then every copy found, in search order, with the one that wins and why; and the
library checks. The same pipeline and output path as `check`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mgpu_doctor.checks import select_checks
from mgpu_doctor.cli.common import emit, progress_on_stderr
from mgpu_doctor.cli.options import (
    add_output_options,
    add_python_option,
    interpreter_from,
    output_options,
    path_text,
)
from mgpu_doctor.diagnose import DiagnoseOptions, diagnose

LIBRARY_CHECKS = ["interpreter", "cuda-libraries", "and-cuda-wheels", "library-copies", "driver-cuda",
                  "ptxas", "cuda-environment"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("libs", help="CUDA/cuDNN/NCCL libraries: built for, in use, every copy found",
                       description="Every CUDA library and tool found, in the dynamic loader's order: "
                       "what TensorFlow was built for, what is in use (the copy the loader returns for "
                       "the soname TensorFlow opens), what the driver supports; and the library checks.")
    p.add_argument("--from", dest="from_file", type=path_text, metavar="FILE",
                   help="read a saved snapshot (`mgpu-doctor snapshot -o FILE`) instead of this machine")
    p.add_argument("--quick", action="store_true",
                   help="do not import TensorFlow or load the libraries (file names and metadata only)")
    add_python_option(p)
    p.add_argument("--no-redact", dest="redact", action="store_false",
                   help="keep user names and home directories in paths")
    add_output_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    options = DiagnoseOptions(
        command="libs", checks=select_checks(LIBRARY_CHECKS, None), quick=args.quick,
        from_file=Path(args.from_file) if args.from_file else None, interpreter=interpreter_from(args),
        redact=args.redact, libraries_view=True,
    )
    output = output_options(args)
    with progress_on_stderr() as progress:
        result = diagnose(options, progress)
    return emit(result.report, output)
