"""`mgpu-doctor snapshot`: gather the facts and write them as JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mgpu_doctor.cli.common import progress_on_stderr
from mgpu_doctor.cli.options import add_python_option, add_redact_option, interpreter_from, path_text
from mgpu_doctor.cli.output import out, say, writable_folder, write_text
from mgpu_doctor.gathering import machine_snapshot
from mgpu_doctor.process.interpreter import Interpreter


def add_parser(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="write this machine's facts as JSON",
                       description="Gather every fact and write a JSON snapshot that "
                       "`mgpu-doctor check --from FILE` can diagnose anywhere.")
    p.add_argument("-o", "--output", type=path_text, metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--quick", action="store_true", help="do not import TensorFlow")
    add_python_option(p)
    add_redact_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    interpreter = interpreter_from(args) or Interpreter.current()
    if args.output:
        writable_folder(args.output)  # before any progress line: a typo is said at once
    with progress_on_stderr() as progress:
        taken = machine_snapshot(interpreter, quick=args.quick, redact=args.redact, progress=progress)
    text = taken.snapshot.to_json()
    if args.output:
        write_text(args.output, text)
        print(f"mgpu-doctor: snapshot written to {args.output}", file=sys.stderr)
    else:
        out(text)
    # Exit 1 when the diagnosed Python does not work (as `check` says it, with the same finding): the
    # snapshot is written all the same (its failed facts say what went wrong), but not silently.
    for finding in taken.broken_interpreter:
        say(f"mgpu-doctor: {finding.title} ({finding.code}); its facts in the snapshot are failed facts")
    return 1 if taken.broken_interpreter else 0
