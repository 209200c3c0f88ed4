"""`mgpu-doctor matrix`: list, show, query and validate the known-issue matrix."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from mgpu_doctor.cli.common import emit
from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.cli.options import (
    add_matrix_option,
    add_output_options,
    add_training_options,
    matrix_dirs,
    output_options,
    path_text,
    training_profile,
)
from mgpu_doctor.diagnose import query
from mgpu_doctor.matrix.known_issues import (
    CONDITION_KEYS,
    KnownIssue,
    Matrix,
    known_issue_paths,
    load_known_issue_files,
    load_matrix,
)
from mgpu_doctor.matrix.match import example_problems
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.matrix.review import reviews
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.renderers.tables import table


def add_parser(sub: Any) -> None:
    p = sub.add_parser("matrix", help="the known-issue matrix: list, show, query, validate",
                       description="The matrix of known multi-GPU issues (hangs, leaks, NaNs, "
                       "crashes, errors, slowdowns) with their versions, workarounds and sources.")
    msub = p.add_subparsers(dest="matrix_command", metavar="ACTION", parser_class=type(p))
    p.set_defaults(run=lambda args: _missing_action(p))

    lst = msub.add_parser("list", help="every known issue, one line each")
    lst.add_argument("--format", choices=["human", "json"], default="human")
    add_matrix_option(lst)
    lst.set_defaults(run=run_list)

    show = msub.add_parser("show", help="one known issue in full")
    show.add_argument("id", metavar="ID")
    show.add_argument("--format", choices=["human", "json"], default="human")
    add_matrix_option(show)
    show.set_defaults(run=run_show)

    query = msub.add_parser(
        "query", help="which known issues apply to versions you name (not this machine's)",
        description="Which known issues apply to the versions and conditions given, e.g. "
        "`tensorflow==1.12 keras==2.2.4 cuda==9.0 cudnn==7.1 driver==384.81 gpus=2 "
        "layers=gru,lstm`. Versions: KEY==VERSION for tensorflow, keras, tf-keras, python, "
        "cuda, cudnn, nccl, cublas, driver, numpy, protobuf, ml-dtypes, h5py, jax, jaxlib, "
        "nvidia-* wheels. "
        "Conditions: gpus=N, layers=a,b, usage=a,b, strategy=, scenario=, workers=K, backend=, "
        "compute_capability=7.5, platform=, cpu_vendor=, cpu_arch=, interconnect=, peer_access=. "
        "Same findings and formats as `check`; the training profile of the working directory applies too.")
    query.add_argument("terms", nargs="+", metavar="KEY==VERSION|KEY=VALUE")
    add_training_options(query)
    add_matrix_option(query)
    add_output_options(query)
    query.set_defaults(run=run_query)

    validate = msub.add_parser("validate", help="check matrix files; every problem at once (exit 2)")
    validate.add_argument("dir", nargs="?", type=path_text, metavar="DIR",
                          help="a matrix directory (default: the bundled matrix)")
    validate.add_argument("--strict", action="store_true",
                          help="the review lines (GPU names, ranges wider than the sources, one thread told "
                          "twice) count as problems too")
    validate.set_defaults(run=run_validate)


def _missing_action(parser: argparse.ArgumentParser) -> int:
    raise UsageError("matrix: choose an action: list, show ID, query KEY==VERSION ..., "
                     "validate [DIR] (see mgpu-doctor matrix --help)")


def _load(args: argparse.Namespace) -> Matrix:
    matrix = load_matrix(bundled_matrix_dir(), matrix_dirs(args))
    for problem in matrix.problems:
        print(f"mgpu-doctor: warning: {problem} (entry not used; see `mgpu-doctor matrix "
              "validate`)", file=sys.stderr)
    return matrix


def _affects(issue: KnownIssue) -> str:
    return " | ".join(" ".join(f"{k}{v}" for k, v in view.affects.items()) for view in issue.views())


def run_list(args: argparse.Namespace) -> int:
    matrix = _load(args)
    issues = sorted(matrix.issues, key=lambda i: i.id)
    if args.format == "json":
        sys.stdout.write(json.dumps([to_jsonable(i) for i in issues], indent=2) + "\n")
        return 0
    rows = [[i.id, i.symptom, i.confidence, _affects(i), i.title] for i in issues]
    sys.stdout.write(table(rows, ["id", "symptom", "confidence", "affects", "title"]) + "\n")
    sys.stdout.write(f"\n{len(issues)} known issues ({', '.join(matrix.sources)}); "
                     "`mgpu-doctor matrix show ID` for one in full.\n")
    return 0


def run_show(args: argparse.Namespace) -> int:
    matrix = _load(args)
    issue = matrix.get(args.id)
    became = matrix.replaced.get(args.id)
    if issue is None and became is not None:  # merged into another entry: that one, said so
        issue = matrix.get(became)
        print(f"{args.id} was merged into {became} (one cause): shown below", file=sys.stderr)
    if issue is None:
        close = [i.id for i in matrix.issues if args.id in i.id][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else "; `mgpu-doctor matrix list` lists them"
        raise UsageError(f"no known issue {args.id!r}{hint}")
    if args.format == "json":
        sys.stdout.write(json.dumps(to_jsonable(issue), indent=2) + "\n")
        return 0
    sys.stdout.write(describe(issue))
    return 0


def describe(issue: KnownIssue) -> str:
    def wrap(label: str, text: str) -> list[str]:
        return textwrap.wrap(f"{label}{text}", width=100, subsequent_indent=" " * len(label)) or [label]

    conditions = condition_lines(issue)
    lines = [f"{issue.id}: {issue.title}", ""]
    lines += wrap("symptom:     ", f"{issue.symptom} ({issue.confidence})")
    lines += wrap("affects:     ", "; or ".join(", ".join(f"{k} {v}" for k, v in view.affects.items())
                                                for view in issue.views()))
    lines += wrap("conditions:  ", "; ".join(x for x in conditions if x) or "none")
    if issue.fixed_in:
        lines += wrap("fixed in:    ", issue.fixed_in)
    if issue.range_closed:
        lines += wrap("range ends:  ", issue.range_closed)
    if issue.replaces:
        lines += wrap("replaces:    ", ", ".join(issue.replaces) + " (merged into this entry)")
    lines += wrap("what:        ", issue.summary)
    lines += wrap("workaround:  ", issue.workaround)
    for s in issue.sources:
        where = s.url or s.ref
        tag = "read" if s.verified else "not verified"
        lines += wrap("source:      ", f"{where} [{s.kind}, {tag}]" + (f" {s.note}" if s.note else ""))
    lines += wrap("file:        ", issue.origin)
    return "\n".join(lines) + "\n"


def condition_lines(issue: KnownIssue) -> list[str]:
    """``key: value`` for every condition the entry sets, in the schema's order."""
    c = issue.conditions
    lines = []
    for key in CONDITION_KEYS:
        value = getattr(c, key)
        if value in (None, ()):
            continue
        lines.append(f"{key}: {', '.join(value) if isinstance(value, tuple) else value}")
    return lines


def run_query(args: argparse.Namespace) -> int:
    return emit(query(args.terms, matrix_dirs(args), training_profile(args)), output_options(args))


def run_validate(args: argparse.Namespace) -> int:
    directory = Path(args.dir).expanduser() if args.dir else bundled_matrix_dir()
    if not directory.is_dir():
        raise UsageError(f"matrix validate: {directory}: no such directory")
    paths = known_issue_paths(directory)
    result = load_known_issue_files(paths)
    problems = list(result.problems)
    for issue in result.issues:
        problems += example_problems(issue)
    if not paths:
        raise UsageError(f"matrix validate: {directory}: no *.toml files "
                         "(expected DIR/known-issues/*.toml or DIR/*.toml)")
    for problem in problems:
        print(problem)
    notes = reviews(result.issues)
    for note in notes:
        print(f"review: {note}")
    if notes:
        print(f"mgpu-doctor: {len(notes)} line(s) to review against the sources (see docs/matrix-schema.md; "
              "--strict counts them as problems)", file=sys.stderr)
    failed = len(problems) + (len(notes) if args.strict else 0)
    if failed:
        print(f"mgpu-doctor: error: {failed} problem(s) in {len(paths)} file(s) under {directory}",
              file=sys.stderr)
        return 2
    examples = sum(len(i.examples) for i in result.issues)
    print(f"{len(result.issues)} known issues in {len(paths)} file(s) under {directory}: valid "
          f"({examples} examples match as they say)")
    return 0
