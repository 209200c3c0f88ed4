"""`mgpu-doctor snapshot`: gather the facts and write them as JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mgpu_doctor.cli.common import progress_on_stderr
from mgpu_doctor.cli.options import add_python_option, add_redact_option, interpreter_from
from mgpu_doctor.cli.output import out, write_text
from mgpu_doctor.model.redact import Identity, redact_snapshot
from mgpu_doctor.probes.gather import GatherOptions, gather_snapshot
from mgpu_doctor.process.interpreter import Interpreter


def add_parser(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="write this machine's facts as JSON",
                       description="Gather every fact and write a JSON snapshot that "
                       "`mgpu-doctor check --from FILE` can diagnose anywhere.")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--quick", action="store_true", help="do not import TensorFlow")
    add_python_option(p)
    add_redact_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    interpreter = interpreter_from(args) or Interpreter.current()
    with progress_on_stderr() as progress:
        snapshot = gather_snapshot(GatherOptions(interpreter, quick=args.quick), progress)
    if args.redact:
        snapshot = redact_snapshot(snapshot, Identity.current())
    text = snapshot.to_json()
    if args.output:
        write_text(args.output, text)
        print(f"mgpu-doctor: snapshot written to {args.output}", file=sys.stderr)
    else:
        out(text)
    return 0
