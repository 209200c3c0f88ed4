"""`mgpu-doctor check`: gather facts (or read them from a file) and run every check."""

from __future__ import annotations

import argparse
from typing import Any

from mgpu_doctor.cli.common import emit, progress_on_stderr
from mgpu_doctor.cli.options import add_diagnose_options, add_output_options, diagnose_options, output_options
from mgpu_doctor.diagnose import diagnose


def add_parser(sub: Any) -> None:
    p = sub.add_parser("check", help="diagnose this machine (or a saved snapshot)",
                       description="Diagnose this machine, or a snapshot saved elsewhere.")
    p.add_argument("--checks", metavar="A,B", help="run only these checks (by name)")
    p.add_argument("--skip", metavar="A,B", help="do not run these checks")
    add_diagnose_options(p)
    add_output_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    options = diagnose_options(args, "check")
    output = output_options(args)
    with progress_on_stderr() as progress:
        result = diagnose(options, progress)
    return emit(result.report, output, result.interrupted)
