"""Lines of text the doctor was given that may show a failure (a paste, a training log, a smoke
run's error and stderr): kept as evidence, so a known issue is recognised by what it printed.

Which lines are kept is one word list (:data:`EVIDENCE_WORDS`); a known-issue signature must be
a line this keeps (`matrix validate` holds that), so nothing matchable is dropped before matching.
"""

from __future__ import annotations

import functools
import re

from mgpu_doctor.process.masking import mask_credentials
from mgpu_doctor.record import record

# A line holding one of these (case-insensitive) may show a failure.
EVIDENCE_WORDS = (
    "error", "exception", "fail", "warn", "fatal", "abort", "could not", "cannot", "can't", "unable",
    "not found", "no such", "killed", "segmentation", "core dumped", "timeout", "timed out", "deadline",
    "hang", "stuck", "nan", "inf", "out of memory", "oom", "exhausted", "check failed", "invalid",
    "mismatch", "compiled with", "unsupported", "undefined symbol", "denied", "refused", "cancelled",
    "canceled", "unavailable", "deprecated", "retracing", "leak", "deadlock", "unknown", "illegal",
    "assert", "terminate", "signal",
    # Failures whose own words hold none of the above (CUDA's, gRPC's, tf.distribute's messages):
    # every line a mechanism names must be kept (tests/test_signatures.py holds that).
    "insufficient", "not_initialized", "not supported", "non supported", "socket closed", "reset by peer",
    "dlopen", "perreplica", "replica context",
)
# The patterns below are compiled on first use (functools.cache), not at import: every run imports
# this module, only a run given a text (a paste, a log) reads lines with them (7 ms of `check --quick`).


@functools.cache
def _words() -> re.Pattern[str]:
    # Searched in the lowered line: an IGNORECASE alternation of these words is 13 times slower,
    # and every line of a paste or a log goes through it.
    return re.compile("|".join(re.escape(w) for w in EVIDENCE_WORDS))


@functools.cache
def frame_line() -> re.Pattern[str]:
    """A traceback's frame line: where the user's code stands in it."""
    return re.compile(r'^\s*File "(?P<file>[^"]{1,400})", line (?P<line>\d{1,9})'
                      r'(?:, in (?P<func>\S{1,200}))?')


@functools.cache
def _exception() -> re.Pattern[str]:
    # The line a failure ends on: an exception (with its module path or not), a fatal check of
    # TensorFlow's C++ code, a crash the shell reports.
    return re.compile(r"^(?:[A-Za-z_][\w.]{0,200}\.)?[A-Z]\w{0,80}"
                      r"(?:Error|Exception|Exit|Interrupt|Failure)(?::|$)")


@functools.cache
def _quoted_exception() -> re.Pattern[str]:
    # An exception quoted inside a sentence ('it shows "ValueError: Flattening a PerReplica ..."').
    return re.compile(r"[\s\"'`(]((?:[A-Za-z_][\w.]{0,200}\.)?[A-Z]\w{0,80}(?:Error|Exception)): \S")


@functools.cache
def _crash() -> re.Pattern[str]:
    return re.compile(r"\bCheck failed:|^Segmentation fault|\(core dumped\)|^Aborted\b|^Killed$"
                      r"|^Fatal Python error")


@functools.cache
def _library_path() -> re.Pattern[str]:
    # A frame in an installed package or the standard library is not the user's code.
    return re.compile(r"site-packages|dist-packages|/lib/python\d|^<frozen |\\lib\\|/usr/lib/"
                      r"|mgpu_doctor[/\\]child_scripts")


LINE_CHARS = 300  # a kept line is cut to this many characters (after masking secrets)
MAX_LINES = 400  # distinct lines kept from one text: the first and the last half of that


@record
class EvidenceLine:
    """One line of a text the doctor holds: its number (1-based), its text (masked, cut to
    :data:`LINE_CHARS`), and how many more times the same text follows it."""

    line: int
    text: str
    repeated: int = 0


@record
class EvidenceText:
    """The evidence lines of one text the doctor was given (`check --log FILE`): where it came
    from, the lines kept, and how many lines it had."""

    origin: str
    lines: list[EvidenceLine]
    total_lines: int = 0


def keeps(text: str) -> bool:
    """Whether a line may show a failure: it names one of :data:`EVIDENCE_WORDS`, or is a frame
    of a traceback."""
    return _words().search(text.lower()) is not None or frame_line().match(text) is not None


def evidence_lines(lines: list[str], first_line: int = 1, keep_all: bool = False) -> list[EvidenceLine]:
    """The distinct lines of ``lines`` that :func:`keeps`, in order, each once with its repeat
    count; at most :data:`MAX_LINES` (the first and last halves: a log's failure is at its end).

    ``keep_all``: every non-blank line (a text that is all error, as a smoke run's).
    Credentials are masked before a line is cut, so a cut never keeps part of a secret that
    masking would have recognised whole.
    """
    first: dict[str, int] = {}  # text -> index in kept
    kept: list[tuple[int, str]] = []
    repeats: list[int] = []
    for number, raw in enumerate(lines, start=first_line):
        text = " ".join(raw.split())
        if not text or not (keep_all or keeps(text)):
            continue
        if text in first:
            repeats[first[text]] += 1
            continue
        first[text] = len(kept)
        kept.append((number, text))
        repeats.append(0)
    chosen = list(range(len(kept)))
    if len(kept) > MAX_LINES:
        chosen = [*range(MAX_LINES // 2), *range(len(kept) - MAX_LINES // 2, len(kept))]
    out = []
    for index in chosen:
        number, text = kept[index]
        shown = mask_credentials(text)
        if len(shown) > LINE_CHARS:
            shown = shown[:LINE_CHARS - 1] + "…"
        out.append(EvidenceLine(number, shown, repeats[index]))
    return out


@record
class Failure:
    """The line a failure ends on, and the last frame of the user's own code before it."""

    line: EvidenceLine
    user_frame: EvidenceLine | None = None
    crash: bool = False  # a crash of native code (a failed check, a signal), not a Python exception

    @property
    def frame_text(self) -> str:
        """"train.py, line 41, in <module>"; "" when the traceback shows none of the user's code."""
        if self.user_frame is None:
            return ""
        match = frame_line().match(self.user_frame.text)
        if match is None:
            return ""
        where = f"{match.group('file')}, line {match.group('line')}"
        return where + (f", in {match.group('func')}" if match.group("func") else "")


def failures(lines: list[EvidenceLine]) -> list[Failure]:
    """Every exception or crash line, each with the user's last frame above it (since the failure
    before), in order."""
    out = []
    frame: EvidenceLine | None = None
    for line in lines:
        match = frame_line().match(line.text)
        if match is not None:
            if not _library_path().search(match.group("file")):
                frame = line
            continue
        if _exception().match(line.text):
            out.append(Failure(line, frame))
            frame = None
        elif (quoted := _quoted_exception().search(line.text)) is not None:
            out.append(Failure(EvidenceLine(line.line, line.text[quoted.start(1):], line.repeated), frame))
            frame = None
        elif _crash().search(line.text):
            out.append(Failure(line, None, crash=True))
    return out
