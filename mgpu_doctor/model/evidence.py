"""Lines of text the doctor was given that may show a failure (a paste, a training log, a smoke
run's error and stderr): kept as evidence, so a known issue is recognised by what it printed.

Which lines are kept is one word list (:data:`EVIDENCE_WORDS`); a known-issue signature must be
a line this keeps (`matrix validate` holds that), so nothing matchable is dropped before matching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mgpu_doctor.process.masking import mask_credentials

# A line holding one of these (case-insensitive) may show a failure.
EVIDENCE_WORDS = (
    "error", "exception", "fail", "warn", "fatal", "abort", "could not", "cannot", "can't", "unable",
    "not found", "no such", "killed", "segmentation", "core dumped", "timeout", "timed out", "deadline",
    "hang", "stuck", "nan", "inf", "out of memory", "oom", "exhausted", "check failed", "invalid",
    "mismatch", "compiled with", "unsupported", "undefined symbol", "denied", "refused", "cancelled",
    "canceled", "unavailable", "deprecated", "retracing", "leak", "deadlock", "unknown", "illegal",
    "assert", "terminate", "signal",
)
_WORDS = re.compile("|".join(re.escape(w) for w in EVIDENCE_WORDS), re.IGNORECASE)
# A traceback's frame line: where the user's code stands in it.
FRAME = re.compile(r'^\s*File "(?P<file>[^"]{1,400})", line (?P<line>\d{1,9})(?:, in (?P<func>\S{1,200}))?')
LINE_CHARS = 300  # a kept line is cut to this many characters (after masking secrets)
MAX_LINES = 400  # distinct lines kept from one text: the first and the last half of that


@dataclass(frozen=True)
class EvidenceLine:
    """One line of a text the doctor holds: its number (1-based), its text (masked, cut to
    :data:`LINE_CHARS`), and how many more times the same text follows it."""

    line: int
    text: str
    repeated: int = 0


@dataclass(frozen=True)
class EvidenceText:
    """The evidence lines of one text the doctor was given (`check --log FILE`): where it came
    from, the lines kept, and how many lines it had."""

    origin: str
    lines: list[EvidenceLine]
    total_lines: int = 0


def keeps(text: str) -> bool:
    """Whether a line may show a failure: it names one of :data:`EVIDENCE_WORDS`, or is a frame
    of a traceback."""
    return _WORDS.search(text) is not None or FRAME.match(text) is not None


def evidence_lines(lines: list[str], first_line: int = 1) -> list[EvidenceLine]:
    """The distinct lines of ``lines`` that :func:`keeps`, in order, each once with its repeat
    count; at most :data:`MAX_LINES` (the first and last halves: a log's failure is at its end).

    Credentials are masked before a line is cut, so a cut never keeps part of a secret that
    masking would have recognised whole.
    """
    seen: dict[str, int] = {}
    kept: list[list[object]] = []
    for number, raw in enumerate(lines, start=first_line):
        text = " ".join(raw.split())
        if not text or not keeps(text):
            continue
        if text in seen:
            kept[seen[text]][2] = int(kept[seen[text]][2]) + 1  # type: ignore[call-overload]
            continue
        seen[text] = len(kept)
        kept.append([number, text, 0])
    if len(kept) > MAX_LINES:
        kept = kept[:MAX_LINES // 2] + kept[-MAX_LINES // 2:]
    out = []
    for number, text, repeated in kept:
        shown = mask_credentials(str(text))
        if len(shown) > LINE_CHARS:
            shown = shown[:LINE_CHARS - 1] + "…"
        out.append(EvidenceLine(int(number), shown, int(repeated)))  # type: ignore[call-overload]
    return out
