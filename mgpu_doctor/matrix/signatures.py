"""Known issues recognised by what the failure printed: the entries' signatures matched against
the lines of a text the doctor holds (a paste, a training log, a smoke run's error and stderr),
and their stack signatures against the threads of a hung process (`mgpu-doctor hang`).

Pure and linear: a signature's pieces are found in order with ``str.find`` in one line; no
pattern is compiled from data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from mgpu_doctor.matrix.known_issues import WILDCARD, KnownIssue, Signature
from mgpu_doctor.model.evidence import EvidenceLine
from mgpu_doctor.record import record

if TYPE_CHECKING:  # annotations only: a hang's stacks are read by `hang`, never by the quick check
    from mgpu_doctor.model.hang import Frame, ThreadStack


@record
class SignatureHit:
    """An entry whose signature a line matched: the first line that did, and where it stands."""

    issue: KnownIssue
    signature: Signature
    line: EvidenceLine
    origin: str  # "pasted text", "log train.log", the smoke run's name

    @property
    def where(self) -> str:
        return f"{self.origin}, line {self.line.line}" if self.line.line else self.origin


def normalised(text: str) -> str:
    """A line as signatures compare it: lowercase, whitespace runs as one space."""
    return " ".join(text.split()).lower()


def pieces_in(pieces: Sequence[str], line: str) -> bool:
    """Whether ``line`` (already :func:`normalised`) holds every piece, in order."""
    at = 0
    for piece in pieces:
        found = line.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def signature_hits(issues: Iterable[KnownIssue], lines: Sequence[EvidenceLine],
                   origin: str) -> list[SignatureHit]:
    """Every entry a line matches, once, with the first line (in text order) that matched it."""
    texts = [normalised(line.text) for line in lines]
    hits = []
    for issue in issues:
        best: tuple[int, Signature] | None = None
        for signature in issue.signatures:
            forms = signature.forms
            for index, text in enumerate(texts):
                if best is not None and index >= best[0]:
                    break
                if any(pieces_in(pieces, text) for pieces in forms):
                    best = (index, signature)
                    break
        if best is not None:
            hits.append(SignatureHit(issue, best[1], lines[best[0]], origin))
    return hits


def text_lines(text: str, first_line: int = 0) -> list[EvidenceLine]:
    """A short text (an exception message, a stderr tail) as numbered lines to match; 0 numbers
    none (a smoke run's error has no line numbers worth showing)."""
    return [EvidenceLine(first_line + i if first_line else 0, line)
            for i, line in enumerate(text.splitlines()) if line.strip()]


@record
class StackHit:
    """An entry whose stack signature a thread's frames matched."""

    issue: KnownIssue
    signature: Signature
    thread: ThreadStack
    frame: Frame  # the innermost frame the signature matched


def frames_match(patterns: Sequence[str], frames: Sequence[Frame]) -> Frame | None:
    """The frame the first pattern matched, where every pattern matches a frame in order (innermost
    first); a frame reads as py-spy prints it, ``function (file:line)``."""
    texts = [normalised(str(f)) for f in frames]
    at, first = 0, None
    for pattern in patterns:
        pieces = tuple(p for p in (normalised(part) for part in pattern.split(WILDCARD)) if p)
        while at < len(texts) and not pieces_in(pieces, texts[at]):
            at += 1
        if at == len(texts):
            return None
        first = first or frames[at]
        at += 1
    return first


def stack_hits(issues: Iterable[KnownIssue], threads: Sequence[ThreadStack]) -> list[StackHit]:
    """Every entry one of the threads matches, once, with the first thread that did."""
    hits = []
    for issue in issues:
        hit = next((StackHit(issue, s, t, f) for s in issue.signatures if s.frames for t in threads
                    for f in [frames_match(s.frames, t.frames)] if f is not None), None)
        if hit is not None:
            hits.append(hit)
    return hits
