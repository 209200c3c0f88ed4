"""Reading files and JSON that come from outside, within limits, with one-line errors.

Every input file (`--from`, `fleet`, `--tf-config @FILE`, `--ack`, `--matrix` TOML) is read
through :func:`read_text`, every outside JSON document (those files, ``TF_CONFIG``) parsed with
:func:`parse_json`. What they refuse, and why:

- more than :data:`MAX_INPUT_BYTES` (a snapshot is well under 1 MiB; ``/dev/zero`` never ends);
- a named pipe that no one writes to within :data:`FIFO_WAIT_S` (a plain open would block forever);
- text that is not UTF-8: UTF-16/32 (a Windows editor's "Unicode"), binary files, other encodings;
- JSON nested deeper than :data:`MAX_JSON_DEPTH` (Python's parser would exhaust its stack);
- integers longer than :data:`MAX_INT_DIGITS` digits (no fact needs them; Python refuses to
  convert more than 4300 digits with advice meant for programmers);
- in a snapshot (:func:`check_fact_sizes`): a string longer than :data:`MAX_FACT_CHARS` characters
  or more than :data:`MAX_GPUS` GPUs, which no real machine has (and which would only make every
  step after the loader slow).

Strings holding half of a UTF-16 surrogate pair (``"\\udcff"``, how ``json.dumps`` writes a file
name that is not UTF-8) are not Unicode and cannot be printed: they are read as U+FFFD.

The messages name the source and what is wrong with it; callers prefix nothing.
"""

from __future__ import annotations

import codecs
import functools
import json
import os
import re
import select
import stat
import time
from pathlib import Path
from typing import Any, NoReturn

MAX_INPUT_BYTES = 64 * 2**20
MAX_JSON_DEPTH = 200
MAX_INT_DIGITS = 64
MAX_FACT_CHARS = 64 * 2**10  # the longest string a snapshot's fact may hold (LD_LIBRARY_PATH: a few KiB)
MAX_GPUS = 4096  # NVML counts the GPUs of one machine: 8 or 16 in practice
FIFO_WAIT_S = 30.0  # how long a named pipe may stay without a writer

_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
)
_BINARY_MAGIC = {b"\x7fELF": "an ELF executable or library", b"PK\x03\x04": "a zip archive",
                 b"\x1f\x8b": "a gzip archive", b"%PDF": "a PDF document"}
# The JSON patterns are compiled on first use: `check --quick` reads no JSON file with them.


@functools.cache
def _json_tokens() -> re.Pattern[str]:
    """A string token of JSON, or one bracket: what the depth scan needs to see."""
    return re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


@functools.cache
def _surrogate_escape() -> re.Pattern[str]:
    return re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


@functools.cache
def _surrogate() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff]")


class InputError(ValueError):
    """An input that cannot be read as what it should be; the message is one line naming it."""


def read_log_tail(path: Path, limit: int = MAX_INPUT_BYTES) -> tuple[str, bool]:
    """A log as text, its last ``limit`` bytes where it is longer (a failure is at a log's end), and
    whether its start was left out. Raises OSError or :class:`InputError`."""
    if stat.S_ISFIFO(path.stat().st_mode):
        return read_text(path, "a log", limit), False
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - limit))
        data = fh.read(limit)
    cut = size > limit
    if cut:  # start at a whole line
        data = data[data.find(b"\n") + 1:]
    if b"\x00" in data[:4096]:
        raise InputError(f"{path}: is a binary file, not a log")
    # a log is read as it is: a progress bar's broken byte does not make it unreadable
    return data.decode("utf-8", errors="replace"), cut


def read_text(path: Path, what: str = "a text file", limit: int = MAX_INPUT_BYTES) -> str:
    """The file as text, read at most ``limit`` bytes of it. Raises OSError or :class:`InputError`."""
    if stat.S_ISFIFO(path.stat().st_mode):
        data = _read_fifo(path, limit + 1)
    else:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{path}: larger than {limit // 2**20} MiB, the most mgpu-doctor reads: "
                         f"not {what}")
    return decode(data, str(path), what)


def _read_fifo(path: Path, limit: int, wait_s: float | None = None) -> bytes:
    """A named pipe (``--from <(mgpu-doctor snapshot)``): wait at most ``wait_s`` for a writer, where
    a plain open would block forever when nothing ever writes to it."""
    wait_s = FIFO_WAIT_S if wait_s is None else wait_s
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    size, started = 0, False
    deadline = time.monotonic() + wait_s
    try:
        while size < limit:
            left = deadline - time.monotonic()
            if not started and left <= 0:
                raise InputError(f"{path}: a named pipe nothing wrote to within {wait_s:g} s")
            ready, _, _ = select.select([fd], [], [], max(0.0, min(left, 0.2)) if not started else None)
            if not ready:
                continue
            try:
                chunk = os.read(fd, min(1 << 20, limit - size))
            except BlockingIOError:
                continue
            if chunk:
                started = True
                chunks.append(chunk)
                size += len(chunk)
            elif started:
                break  # the writer closed it: end of the input
            else:
                time.sleep(0.05)  # no writer yet: a non-blocking read says end of file
    finally:
        os.close(fd)
    return b"".join(chunks)


def decode(data: bytes, source: str, what: str = "a text file") -> str:
    """UTF-8 text (a UTF-8 byte order mark is dropped), or an :class:`InputError` saying what it is."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            _wrong_encoding(source, name)
    for magic, kind in _BINARY_MAGIC.items():
        if data.startswith(magic):
            raise InputError(f"{source}: is {kind}, not {what}")
    head = data[:4096]
    if head.count(b"\x00") > len(head) // 4 and _looks_utf16(head):
        _wrong_encoding(source, "UTF-16")
    if b"\x00" in data:
        offset = data.index(b"\x00")
        raise InputError(f"{source}: is a binary file (a NUL byte at offset {offset}), not {what}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"{source}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, "
                         f"column {column}); save it as UTF-8") from None
    return text.removeprefix("\ufeff")


def _looks_utf16(head: bytes) -> bool:
    # ASCII written as UTF-16 without a byte order mark: every other byte is NUL.
    even, odd = head[0::2], head[1::2]
    return even.count(0) > len(even) * 0.9 or odd.count(0) > len(odd) * 0.9


def _wrong_encoding(source: str, name: str) -> NoReturn:
    raise InputError(f"{source}: is {name} text; mgpu-doctor reads UTF-8 (convert it, e.g. "
                     f"`iconv -f {name} -t UTF-8`)")


def parse_json(text: str, source: str) -> Any:
    """Parse JSON from outside. Raises ``json.JSONDecodeError`` (with its position) for JSON that
    does not parse, :class:`InputError` for JSON beyond the limits above."""
    _check_depth(text, source)
    try:
        data = json.loads(text, parse_int=lambda digits: _int(digits, source))
    except RecursionError:  # the depth scan should have caught it; never a traceback
        raise InputError(f"{source}: JSON nested too deeply to read") from None
    if _surrogate_escape().search(text):
        data = _without_surrogates(data)  # depth is bounded above: the recursion is safe
    return data


def _int(digits: str, source: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise InputError(f"{source}: holds an integer with {len(digits.lstrip('-'))} digits; no fact "
                         f"has more than {MAX_INT_DIGITS} (edited or corrupted?)")
    return int(digits)


def _check_depth(text: str, source: str) -> None:
    depth = 0
    for match in _json_tokens().finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise InputError(f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep (at line "
                                 f"{line}); no mgpu-doctor file is (edited or corrupted?)")
        elif token in "]}":
            depth -= 1


def _without_surrogates(data: Any) -> Any:
    """Lone surrogates (a non-UTF-8 file name or environment value, escaped by ``json.dumps``)
    replaced by U+FFFD: still readable, and printable."""
    if isinstance(data, str):
        return _surrogate().sub("\ufffd", data)
    if isinstance(data, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_without_surrogates(v) for v in data]
    return data


def check_fact_sizes(data: Any, path: str) -> None:
    """Refuse a string (value or key) longer than :data:`MAX_FACT_CHARS` anywhere in ``data``, with
    :class:`InputError` naming its field (``snapshot.env.LD_LIBRARY_PATH``). Depth is bounded by
    :func:`parse_json`, so the recursion is safe."""
    if isinstance(data, str):
        if len(data) > MAX_FACT_CHARS:
            raise InputError(f"{path}: a string of {len(data)} characters; no fact of a real machine "
                             f"has more than {MAX_FACT_CHARS} (edited or corrupted?)")
    elif isinstance(data, dict):
        for key, value in data.items():
            name = f"{path}.{shorten(key, 40) if len(str(key)) > MAX_FACT_CHARS else key}"
            check_fact_sizes(key, name)
            check_fact_sizes(value, name)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            check_fact_sizes(value, f"{path}[{i}]")


def shorten(value: object, limit: int = 60) -> str:
    """``repr`` of a value for a one-line message, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text)} characters)"
