"""`mgpu-doctor profile --code PATH`: the training profile the code shows, as the
``[tool.mgpu-doctor.training]`` table to paste into pyproject.toml, each word with where it was read."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.cli.options import path_text
from mgpu_doctor.cli.output import out
from mgpu_doctor.diagnose import read_user_code
from mgpu_doctor.training.code import CodeReading
from mgpu_doctor.training.code_rules import NOT_DECIDED
from mgpu_doctor.training.declared import PYPROJECT, PYPROJECT_TABLE


def add_parser(sub: Any) -> None:
    p = sub.add_parser("profile", help="the training profile your code shows, for pyproject.toml",
                       description="Read your training code (never run it) and print the strategy, layers "
                       f"and usage it shows as the {PYPROJECT_TABLE} table of {PYPROJECT}, each word with "
                       "the file and line that shows it.")
    p.add_argument("--code", type=path_text, metavar="PATH", action="append", default=[], required=True,
                   help="a Python file or a folder of them (repeatable)")
    p.add_argument("--format", choices=("toml", "json"), default="toml", help="output format (default: toml)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.code:
        raise UsageError("profile: --code names no path")
    readings = [read_user_code(Path(path)) for path in args.code]
    out(profile_json(readings) if args.format == "json" else profile_toml(readings))
    return 0


def _words(readings: list[CodeReading], key: str) -> list[str]:
    return list(dict.fromkeys(w for r in readings for w in r.words(key)))


def profile_toml(readings: list[CodeReading]) -> str:
    """The table, with a comment per word naming the first line that shows it."""
    lines = [f"# Read from {', '.join(r.root for r in readings)} (never run): paste into {PYPROJECT}.",
             "# A usage list here names what you use: add the words code cannot show if you use them",
             "# (set in the shell, a launcher or a container; `mgpu-doctor check --help` lists every word):",
             *_wrapped(sorted(NOT_DECIDED)), PYPROJECT_TABLE]
    strategies = _words(readings, "strategy")
    facts = [f for r in readings for f in r.facts]
    if strategies:
        if len(strategies) > 1:
            lines.append(f"# the code names several: {', '.join(strategies)}; the first is kept")
        lines.append(f"strategy = {json.dumps(strategies[0])}")
    for key in ("layers", "usage"):
        words = _words(readings, key)
        if not words:
            continue
        lines.append(f"{key} = [")
        for word in words:
            first = next(f for f in facts if f.key == key and f.word == word)
            lines.append(f"    {json.dumps(word)},  # {first.file}:{first.line} {first.why}")
        lines.append("]")
    return "\n".join(lines)


def profile_json(readings: list[CodeReading]) -> str:
    strategies = _words(readings, "strategy")
    return json.dumps({
        "strategy": strategies[0] if strategies else None,
        "layers": _words(readings, "layers"), "usage": _words(readings, "usage"),
        "facts": [{"key": f.key, "word": f.word, "file": f.file, "line": f.line, "why": f.why}
                  for r in readings for f in r.facts],
        "partial": [p for r in readings for p in r.partial],
    }, indent=2)


def _wrapped(words: list[str], width: int = 96) -> list[str]:
    lines, line = [], "#  "
    for word in words:
        if len(line) + len(word) + 2 > width:
            lines.append(line.rstrip(","))
            line = "#  "
        line += f" {word},"
    return lines + [line.rstrip(",")]
