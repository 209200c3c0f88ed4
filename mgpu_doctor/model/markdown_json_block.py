"""The JSON block inside a Markdown bug report (`mgpu-doctor report`), written and read back.

Reading is forgiving about what happens to a pasted report (CRLF or CR line endings, a byte
order mark, text before and after, quoting with ``> ``) and exact about what is missing when the
JSON block itself was cut off or edited.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mgpu_doctor.process.inputs import parse_json

MARKER = "<!-- mgpu-doctor-report"
SUMMARY = "Full snapshot and results (JSON, read back by <code>mgpu-doctor check --from FILE</code>)"
_OPEN = re.compile(r"^\s*(```+|~~~+)\s*json\s*$")


class EmbeddedJsonError(ValueError):
    """The report has no usable JSON block; the message says what is missing."""


def json_block(data: Any) -> list[str]:
    """The collapsed block that carries the whole report as JSON."""
    return ["<details>", f"<summary>{SUMMARY}</summary>", "", "```json",
            json.dumps(data, indent=1), "```", "", "</details>"]


def normalise(text: str) -> str:
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def looks_like_markdown_report(text: str) -> bool:
    return MARKER in text or "# mgpu-doctor" in text or SUMMARY in text


def extract_json(text: str, source: str = "the report") -> tuple[Any, int]:
    """The data of the last ```json block and the file line it starts on (1-based).

    Raises :class:`EmbeddedJsonError`, or :class:`~mgpu_doctor.process.inputs.InputError` for JSON
    beyond the input limits."""
    lines = [_unquote(line) for line in normalise(text).split("\n")]
    starts = [i for i, line in enumerate(lines) if _OPEN.match(line)]
    if not starts:
        raise EmbeddedJsonError(
            "no ```json block found: the collapsed 'Full snapshot and results' section at the end of "
            "the report is missing (truncated, or copied from the rendered page instead of the file?)"
        )
    start = starts[-1]
    fence = _OPEN.match(lines[start]).group(1)  # type: ignore[union-attr]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == fence), None)
    body = "\n".join(lines[start + 1:end])
    try:
        data = parse_json(body, f"{source}: the JSON block at line {start + 1}")
    except json.JSONDecodeError as exc:
        where = f"line {start + 1 + exc.lineno}, column {exc.colno}"
        if end is None:
            raise EmbeddedJsonError(
                f"the JSON block opened at line {start + 1} is cut off: no closing {fence} and the "
                f"JSON ends early ({where}: {exc.msg}); the report was truncated"
            ) from None
        raise EmbeddedJsonError(
            f"the JSON block (lines {start + 2}-{end}) is not valid JSON ({where}: {exc.msg}); edited?"
        ) from None
    return data, start + 2


def _unquote(line: str) -> str:
    # A report pasted into a quote (email, forum) keeps its content after "> ".
    while line.startswith(">"):
        line = line[1:].removeprefix(" ")
    return line
