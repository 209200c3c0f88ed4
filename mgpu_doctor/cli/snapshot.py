"""`mgpu-doctor snapshot`: gather the facts and write them as JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.interpreter import check_interpreter
from mgpu_doctor.cli.common import progress_on_stderr
from mgpu_doctor.cli.options import add_python_option, add_redact_option, interpreter_from, path_text
from mgpu_doctor.cli.output import out, say, writable_folder, write_text
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.redact import Identity, redact_snapshot
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.probes.gather import GatherOptions, gather_snapshot
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
        snapshot = gather_snapshot(GatherOptions(interpreter, quick=args.quick), progress)
    if args.redact:
        snapshot = redact_snapshot(snapshot, Identity.current())
    text = snapshot.to_json()
    if args.output:
        write_text(args.output, text)
        print(f"mgpu-doctor: snapshot written to {args.output}", file=sys.stderr)
    else:
        out(text)
    return _interpreter_verdict(snapshot)


def _interpreter_verdict(snapshot: Snapshot) -> int:
    """1 when the diagnosed Python does not work (as `check` says it, with the same finding): the
    snapshot is written all the same (its failed facts say what went wrong), but not silently."""
    try:
        findings = check_interpreter(snapshot)
    except CheckSkipped:
        return 0
    broken = [f for f in findings if f.severity >= Severity.ERROR]
    for finding in broken:
        say(f"mgpu-doctor: {finding.title} ({finding.code}); its facts in the snapshot are failed facts")
    return 1 if broken else 0
