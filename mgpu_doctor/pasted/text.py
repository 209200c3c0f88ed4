"""A paste as lines, the way it was copied: Markdown fences and ``>`` quoting taken off (line
numbers kept), and the small helpers every format reader shares."""

from __future__ import annotations

import re
from collections.abc import Callable

from mgpu_doctor.model.pasted import LogLine, PastedImage, PastedLaunch
from mgpu_doctor.model.snapshot import GpuFacts, TfDevice
from mgpu_doctor.record import field, record

_FENCE = re.compile(r"^\s*(```+|~~~+)")
_HTML = re.compile(r"^\s*(</?(details|summary|pre|code|br)\b[^>]*>|<!--.*-->)\s*$", re.IGNORECASE)
VERSION = r"\d+(?:\.\d+)+(?:(?:-?rc|a|b|[.-]?dev|\.post)\d*)?(?:\+[\w.]+)?"
_VERSION_WORD = re.compile(rf"(?<![\w.-])v?({VERSION})(?![\w.]*\d)")
_GIT_DESCRIBE = re.compile(r"\bv\d+\.\d+\.\d+(?:-rc\d+)?-\d+-g[0-9a-f]+|\bb'v[^']*'"
                           r"|\bv\d+\.\d+\.\d+-rc\d+-\S+")
MAX_SCANNED = 2000  # a line is searched this far: a pasted line can be megabytes long
EMPTY_VALUES = frozenset({"", "n/a", "na", "none", "-", "no", "unknown", "?", "not applicable", "nil",
                          "null", "no gpu", "cpu", "no response"})


MAX_DIGITS = 18  # no figure a paste states (memory in MiB, a PID, an index) is longer


class PasteRefused(ValueError):
    """The text describes more than any machine has; the message is one line saying what."""


def whole(digits: str) -> int:
    """A whole number the paste states; refused past :data:`MAX_DIGITS` digits (``int()`` would take
    quadratic time, and past 4,300 digits raise)."""
    if len(digits) > MAX_DIGITS:
        raise PasteRefused(f"a number of {len(digits):,} digits ({digits[:12]}...): longer than any figure "
                           "a GPU or a process has (edited or generated?)")
    return int(digits)


def paste_lines(text: str) -> list[str]:
    """The paste's lines (index 0 is line 1), unquoted, fences and HTML wrappers blanked."""
    out = []
    for raw in text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = _unquoted(raw)
        if _FENCE.match(line) or _HTML.match(line):
            line = ""
        out.append(line.rstrip())
    return out


def _unquoted(line: str) -> str:
    """The line without its ``>`` quoting (any depth, a blank after each ``>``); ``>>>`` is a prompt.
    Walked by index: cutting the string once per level would be quadratic in a line of ``> > > …``."""
    start = 0
    while True:
        at = _BLANKS.match(line, start).end()  # type: ignore[union-attr]
        if not line.startswith(">", at) or line.startswith(">>>", at) or _COMPARISON.match(line, at):
            return line[start:] if start else line
        start = at + 1
        if line.startswith(" ", start):
            start += 1


_BLANKS = re.compile(r"\s*")
_COMPARISON = re.compile(r">\s?=\s?v?\d")  # "> =2.2" typed as a version's answer: ">=", not a quote
_NAME_GLUED = re.compile(r"(?i)(?<![\w.-])(?:tf|tensorflow(?:-gpu)?|cuda|cudnn|python|keras)(?=\d)"
                         # a distribution's name joined to its version: "tf-nightly-gpu-2.5.0.dev20201201"
                         r"|(?<![\w.-])(?:tf[-_]nightly|tensorflow)(?:[-_](?:gpu|cpu))?[-_](?=\d)")


def first_version(value: str) -> str:
    """The first version in a typed value: "v2.4.0-49-g85c8b2a 2.4.1" -> "2.4.1", "CUDA 11.2" -> "11.2",
    "TF2.1.0-gpu-py3" -> "2.1.0"."""
    value = _GIT_DESCRIBE.sub(" ", value[:MAX_SCANNED])
    value = _NAME_GLUED.sub(" ", value)
    tuple_form = re.search(r"(?<![\w.])(\d+),\s*(\d+),\s*(\d+)(?![\w.])", value)  # torch.cuda.nccl.version()
    if tuple_form and not _VERSION_WORD.search(value):
        return ".".join(tuple_form.groups())
    match = _VERSION_WORD.search(value)
    if match:
        return match.group(1)
    bare = re.fullmatch(r"\s*(?:[A-Za-z]+\s*)?v?(\d+)\s*", value)  # "7", "cuDNN 7", "v8"
    return bare.group(1) if bare else ""


def cudnn_from_number(text: str) -> str:
    """cuDNN's version as its CUDNN_VERSION integer prints it, as a version: "7003" -> "7.0.3", "8101" ->
    "8.1.1", "90300" -> "9.3.0" (major*1000 + minor*100 + patch before 9, major*10000 + minor*100 + patch
    from 9); anything else as it is."""
    if not text.isdecimal() or len(text) not in (4, 5):
        return text
    n = int(text)
    if len(text) == 5:
        return f"{n // 10000}.{n // 100 % 100}.{n % 100}"
    return f"{n // 1000}.{n // 100 % 10}.{n % 100}"


def stated(value: str) -> bool:
    return value.strip().strip("*`_ ").lower() not in EMPTY_VALUES


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@record(frozen=False)
class Found:
    """What one format reader found in the paste (lines are 0-based indices here)."""

    kind: str
    first: int
    last: int
    rank: int  # which statement of a version wins: higher beats lower
    versions: dict[str, str] = field(default_factory=dict)
    version_lines: dict[str, int] = field(default_factory=dict)  # the line a version was stated on
    facts: list[str] = field(default_factory=list)
    unread: list[int] = field(default_factory=list)
    packages: dict[str, str] = field(default_factory=dict)
    gpus: list[GpuFacts] = field(default_factory=list)
    driver: str = ""
    cuda_driver: str = ""
    build_info: dict[str, str] = field(default_factory=dict)
    devices: list[TfDevice] = field(default_factory=list)
    found: list[TfDevice] = field(default_factory=list)  # "Found device" lines (before any is created)
    loaded: list[str] = field(default_factory=list)
    log: list[LogLine] = field(default_factory=list)
    os_release: str = ""
    tensorflow_ran: bool = False
    used: list[int] = field(default_factory=list)  # the lines read, where not every line first..last is
    previous: list[str] = field(default_factory=list)  # versions of a set-up the text calls old or working
    images: list[PastedImage] = field(default_factory=list)
    launches: list[PastedLaunch] = field(default_factory=list)

    def lines(self) -> range | list[int]:
        return self.used or range(self.first, self.last + 1)


# How much one statement is worth against another, by the reader that found it.
# A version said in a sentence ("with TensorFlow 2.4.1 on 2 GPUs") is worth least of all.
RANK_PROSE, RANK_TEMPLATE, RANK_PACKAGES, RANK_TOOL, RANK_SMI, RANK_BUILD, RANK_LOG = 0, 1, 2, 3, 4, 5, 6


def find_blocks(lines: list[str], read_block: Callable[[list[str], int], Found | None]) -> list[Found]:
    """Every block ``read_block`` recognises, scanning on after the last line of each one found."""
    found: list[Found] = []
    i = 0
    while i < len(lines):
        block = read_block(lines, i)
        if block is None:
            i += 1
            continue
        found.append(block)
        i = block.last + 1
    return found
