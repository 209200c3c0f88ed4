"""`mgpu-doctor report`: a redacted Markdown bug report to paste into an issue."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mgpu_doctor.cli.common import interrupted_exit, progress_on_stderr
from mgpu_doctor.cli.hang import add_hang_options, hang_request, pid_argument
from mgpu_doctor.cli.options import add_diagnose_options, diagnose_options, path_text
from mgpu_doctor.cli.output import out, write_text
from mgpu_doctor.diagnose import diagnose
from mgpu_doctor.record import replace
from mgpu_doctor.renderers import RenderOptions
from mgpu_doctor.renderers.bug_report import render, verdict
from mgpu_doctor.renderers.html_report import render as render_html


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="write a Markdown bug report to paste into an issue, or an HTML file (redacted)",
        description="Diagnose this machine (or a saved snapshot) and write one Markdown file for a "
        "support request: findings with fixes, environment tables, and the full facts as JSON, which "
        "`mgpu-doctor check --from FILE` replays on any machine. Hostname, user name, home directory "
        "and GPU UUIDs are redacted unless --no-redact.")
    p.add_argument("-o", "--output", type=path_text, metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--format", choices=["markdown", "html"], default="markdown",
                   help="markdown (default: to paste into an issue) or html (one self-contained file "
                        "with the charts as SVG, for CI artifacts)")
    p.add_argument("--hang", nargs="*", type=pid_argument, metavar="PID", default=None,
                   help="also read the running (hung) job: its processes' stacks, states and GPUs "
                        "(`mgpu-doctor hang`; default: the Python processes that hold GPUs or carry a "
                        "TF_CONFIG); no smoke training runs beside it")
    add_diagnose_options(p)
    add_hang_options(p, pids=False)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    options = diagnose_options(args, "report")
    if args.hang is not None:  # the GPUs are the job's: nothing else trains on them meanwhile
        options = replace(options, hang=hang_request(args, args.hang), smoke=None)
    with progress_on_stderr() as progress:
        result = diagnose(options, progress)
    if args.format == "html":
        text = render_html(result.report, RenderOptions(), title="mgpu-doctor report: "
                           + verdict(result.report))
    else:
        text = render(result.report, RenderOptions(), redacted=args.redact)
    if args.output:
        write_text(args.output, text)
        how = ("open it in a browser, or keep it as a CI artifact" if args.format == "html" else
               "paste it into the issue, or attach it (`mgpu-doctor check --from FILE` replays it)")
        print(f"mgpu-doctor: report written to {args.output}: {how}", file=sys.stderr)
    else:
        out(text)
    return interrupted_exit() if result.interrupted else 0
