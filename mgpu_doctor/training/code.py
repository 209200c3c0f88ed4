"""The user's code as training facts: what :mod:`.code_rules` read in each file, merged into the
profile as observed facts ("code: PATH"), and the report's line listing them with file and line.

Pure: the sources come from ``probes/code_files.py``.
"""

from __future__ import annotations

import re

from mgpu_doctor.model.findings import CheckOutcome, Finding, Section, Severity, status_for
from mgpu_doctor.model.training import TrainingFacts, TrainingProfile
from mgpu_doctor.record import field, record, replace
from mgpu_doctor.training.code_rules import DECIDED, CodeFact, read_source

CHECK_NAME = "code"
CODES = ("code.read", "code.unparsed")
SHOWN_FACTS = 40


@record
class CodeReading:
    """What the code under ``root`` shows; ``partial`` names files read only in part or not at all."""

    root: str
    files: int
    facts: list[CodeFact] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    # The whole code (a file or a folder): a word it does not show is not used. A paste's code
    # blocks are fragments: what they show counts, what they do not show stays unknown.
    whole: bool = True

    def words(self, key: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.word for f in self.facts if f.key == key))


def read_code(root: str, files: list[tuple[str, str]], skipped: list[str]) -> CodeReading:
    facts: list[CodeFact] = []
    partial = list(skipped)
    for name, text in files:
        found, whole = read_source(text, name)
        facts += found
        if not whole:
            partial.append(f"{name}: not valid Python as a whole, read block by block")
    facts.sort(key=lambda f: (f.file, f.line))
    return CodeReading(root, len(files), facts, partial)


_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_CODE_HINT = re.compile(r"^\s*(import |from \w+ import |def |class |with |for "
                        r"|\w+(\.\w+)* ?= ?\S|\w+(\.\w+)+\()")


def fenced_code(text: str) -> list[tuple[int, str]]:
    """The Python code blocks of a paste: fenced blocks marked python (or unmarked and looking like
    code), as (line of their first line, 1-based; their text)."""
    lines = text.replace("\r\n", "\n").split("\n")
    blocks: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i].lstrip("> "))
        if opening is None:
            i += 1
            continue
        fence, language = opening.group(1), opening.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip("> ").strip().startswith(fence)),
                   len(lines))
        body = [line[2:] if line.startswith("> ") else line for line in lines[i + 1:end]]
        code_like = sum(1 for line in body if _CODE_HINT.match(line)) >= max(1, len(body) // 4)
        if language in ("python", "py", "python3", "ipython", "pycon") or (not language and code_like):
            blocks.append((i + 2, "\n".join(body)))
        i = end + 1
    return blocks


def paste_reading(text: str, name: str) -> CodeReading | None:
    """What a paste's code blocks show (fragments: nothing they do not show is ruled out)."""
    blocks = fenced_code(text)
    if not blocks:
        return None
    facts: list[CodeFact] = []
    partial = []
    for first, body in blocks:
        # the block's place in the paste as an offset: padding it with newlines was quadratic
        found, whole = read_source(body, name, offset=first - 1)
        facts += found
        if not whole:
            partial.append(f"the code block at line {first}: read block by block")
    return CodeReading(name, len(blocks), facts, partial, whole=False)


def with_code(profile: TrainingProfile, reading: CodeReading) -> TrainingProfile:
    """The profile with what the code shows as observed facts, added to what the model showed.

    The layers and usage read are the whole lists of that code; the usage words code cannot show
    (set in the shell, or not visible in source) stay undecided.
    """
    source = f"code: {reading.root}"
    strategies = reading.words("strategy")
    # a fragment's layers are not the model's whole list: only the whole code says them
    read_layers = reading.words("layers") if reading.whole else ()
    layers = tuple(dict.fromkeys(profile.observed.layers + read_layers))
    usage = tuple(dict.fromkeys(profile.observed.usage + reading.words("usage")))
    observed = TrainingFacts(
        strategy=profile.observed.strategy or (strategies[0] if strategies else None),
        layers=layers, usage=usage, gpus=profile.observed.gpus, workers=profile.observed.workers,
        backend=profile.observed.backend, scenario=profile.observed.scenario)
    sources = dict(profile.observed_from)
    for key in ("strategy", "layers", "usage"):
        if reading.words(key) and (key != "layers" or reading.whole):
            before = sources.get(key, "")
            sources[key] = f"{before}; {source}" if before and before != source else source
    decided = DECIDED if reading.whole else reading.words("usage")
    checked = tuple(dict.fromkeys(profile.usage_checked + decided))
    return replace(profile, observed=observed, observed_from=sources, usage_checked=checked)


def code_outcome(reading: CodeReading) -> CheckOutcome:
    """The report's line for the code read: each word with the file and line that shows it."""
    shown = [str(f) for f in reading.facts[:SHOWN_FACTS]]
    if len(reading.facts) > SHOWN_FACTS:
        shown.append(f"... and {len(reading.facts) - SHOWN_FACTS} more")
    summary = "; ".join(f"{key} {', '.join(reading.words(key)) or '(none)'}"
                        for key in ("strategy", "layers", "usage"))
    if reading.whole:
        what = f"{reading.files} file(s) under {reading.root}"
        fix = ("Known issues are matched against these words; a usage word the code does not show counts as "
               "not used (except those set outside Python: the shell, a launcher).")
    else:
        what = f"{reading.files} code block(s) of {reading.root}"
        fix = ("Known issues are matched against the words these fragments show; what they do not show "
               "stays unknown (`check --code PATH` reads the whole code).")
    findings = [Finding("code.read", Severity.INFO, f"Read {what}, never run: {summary}", shown, fix=fix)]
    if reading.partial:
        findings.append(Finding("code.unparsed", Severity.INFO,
                                f"{len(reading.partial)} file(s) read in part or left out",
                                reading.partial[:20],
                                fix="A file that is not valid Python is read block by block and, where a "
                                "block does not parse, by the names it calls (no loops then)."))
    return CheckOutcome(CHECK_NAME, f"Your code ({reading.root}): read, never run", status_for(findings),
                        findings, section=Section.TENSORFLOW)
