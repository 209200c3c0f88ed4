"""What a machine can see of an entry saying more than its sources, beyond the hard rules of
:func:`~mgpu_doctor.matrix.known_issues.parse_issue`: lines for a person to review.

- **GPU names**: a ``gpu_names`` condition is usually the reporter's card, not the trigger; the
  trigger is an architecture (``compute_capability``) unless the product itself is.
- **A range wider than its sources**: a bound of a range that is open above its last report (no
  fix known) that no text of the entry names (title, summary, source titles and notes), or a range
  without a lower bound (every older release included; OSV's ``introduced`` is missing).
- **Advice that does not say whose it is**: a workaround that opens neither with ``From <source>:``
  (what a source posted) nor with ``None posted`` / ``None confirmed`` (the bundled matrix's
  workarounds all do; a team's own matrix is told, not refused).
- **One mechanism told twice**: two entries citing the same issue thread, with one symptom and
  overlapping versions, where no note says which comment each retells.

`matrix validate` prints them after the problems (`--strict`: they count as problems); the test
suite pins the bundled matrix's list, so a new entry adds none without a person reading it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import combinations

from mgpu_doctor.matrix.known_issues import GENERIC_ADVICE, NONE_CONFIRMED, NONE_POSTED, KnownIssue
from mgpu_doctor.matrix.ranges import Span, range_texts
from mgpu_doctor.model.versions import Tri, parse_specifier, parse_version, range_in
from mgpu_doctor.record import record

_PRE_NAMES = {"a": "alpha", "b": "beta", "rc": "rc"}


@record
class Review:
    """One thing for a person to read against the entry's sources."""

    entry: str
    rule: str  # "gpu-names", "unsourced-bound", "no-lower-bound", "unattributed-workaround", "same-thread"
    message: str

    def __str__(self) -> str:
        return f"{self.entry}: {self.rule}: {self.message}"


def reviews(issues: Sequence[KnownIssue]) -> list[Review]:
    """Every review line of these entries, in the matrix's order."""
    found: list[Review] = []
    for issue in issues:
        found += _gpu_names(issue) + _range_bounds(issue) + _unattributed(issue)
    return found + _same_thread(issues)


def _gpu_names(issue: KnownIssue) -> list[Review]:
    names = issue.conditions.gpu_names
    if not names:
        return []
    return [Review(issue.id, "gpu-names", f"the condition names GPUs ({', '.join(names)}): the reporters' "
                   "cards, or the trigger? Name the architecture (compute_capability) unless the product is")]


def _unattributed(issue: KnownIssue) -> list[Review]:
    if issue.workaround.startswith(("From ", NONE_POSTED, NONE_CONFIRMED)):
        return []
    return [Review(issue.id, "unattributed-workaround", "the workaround does not say whose advice it is: "
                   f"open with 'From <source>: ...' (what a source posted), {NONE_POSTED!r} or "
                   f"{NONE_CONFIRMED!r}, our own advice after it marked {GENERIC_ADVICE!r}")]


def _range_bounds(issue: KnownIssue) -> list[Review]:
    text = " ".join([issue.title, issue.summary, issue.fixed_in, issue.range_closed]
                    + [f"{s.title} {s.note}" for s in issue.sources])
    found = []
    for key, reading in ((k, view.reading(k)) for view in issue.views() for k in view.affects):
        if not reading.open_above:
            continue
        for span in reading.spans:
            if not span.first and span.above is not None:
                found.append(Review(issue.id, "no-lower-bound", f"{key} {span.text} has no lower bound: "
                                    "every older release is included; start it where the sources saw it"))
            found += [Review(issue.id, "unsourced-bound", f"{key} {span.text}: no title, summary or source "
                             f"note names {bound}; bound the range by what the sources report")
                      for bound in _bounds(span) if not names_version(text, bound, key)]
    return found


def _bounds(span: Span) -> list[str]:
    """The versions a range's bounds claim were seen: its lower bound and its last report."""
    out = [span.first.removesuffix(".*")] if span.first else []
    if span.above is not None and span.last and span.last.removesuffix(".x") not in out:
        out.append(span.last.removesuffix(".x"))
    return out


def names_version(text: str, version_text: str, package: str = "") -> bool:
    """Whether ``text`` names the version as people write it: ``2.0.0b1`` as 2.0.0-beta1 or beta1,
    ``2.4.0rc4`` as 2.4.0-rc4, a nightly by its date, ``1.12.0`` as 1.12, a series ``2.14`` as 2.14,
    a major's first release ``3.0`` as "Keras 3" (the package's name, then the major)."""
    version = parse_version(version_text)
    if version is None:
        return version_text in text
    release = ".".join(map(str, version.release))
    # a form, and whether a further ".N" may follow it (a series "2.14" is named by "2.14.1")
    forms = {(version_text, len(version.release) == 2), (release, len(version.release) == 2)}
    if version.release[-1] == 0 and len(version.release) == 3:
        forms.add((".".join(map(str, version.release[:2])), False))
    if package and version.pre is None and version.dev is None and not any(version.release[1:]):
        forms.add((f"{package} {version.major}", False))
    if version.dev is not None and version.dev > 19000000:  # a nightly: its date
        return str(version.dev) in text
    if version.pre is not None:
        kind, number = version.pre
        word = _PRE_NAMES[kind]
        bases = {release, ".".join(map(str, version.release[:2]))}
        pres = [f"{kind}{number}", f"{word}{number}", f"{word}-{number}", f"{word}.{number}",
                f"{word} {number}"] + ([word] if number == 0 else [])
        forms = {(f"{b}{sep}{p}", False) for b in bases for p in pres for sep in ("", "-", " ", ".")}
    return any(re.search(r"(?<![\w.])" + re.escape(f) + (r"(?!\d)" if more else r"(?!\d|\.\d)"), text, re.I)
               for f, more in forms)


def _same_thread(issues: Sequence[KnownIssue]) -> list[Review]:
    found = []
    for a, b in combinations(issues, 2):
        if a.symptom != b.symptom:
            continue
        shared = _threads(a) & _threads(b)
        if not shared or not _versions_overlap(a, b):
            continue
        for url in sorted(shared):
            notes = [s.note for i in (a, b) for s in i.sources if s.url == url]
            if not any("comment" in n.lower() for n in notes):
                found.append(Review(b.id, "same-thread", f"{a.id} cites {url} too, with the same symptom and "
                                    "overlapping versions: one mechanism (merge them, the other id in "
                                    "`replaces`), or a note says which comment each retells"))
    return found


def _threads(issue: KnownIssue) -> set[str]:
    return {s.url for s in issue.sources if s.kind == "issue" and s.url}


def _versions_overlap(a: KnownIssue, b: KnownIssue) -> bool:
    """Some alternative of each entry's ``affects`` overlaps one of the other's on every key both name."""
    return any(_overlap(x.affects, y.affects) for x in a.views() for y in b.views())


def _overlap(a: dict[str, str], b: dict[str, str]) -> bool:
    return all(any(range_in(parse_specifier(x), parse_specifier(y)) is not Tri.NO
                   for x in range_texts(a[k]) for y in range_texts(b[k])) for k in set(a) & set(b))
