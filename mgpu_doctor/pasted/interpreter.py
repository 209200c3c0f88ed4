"""Versions the Python interpreter printed: ``tf.__version__ = '2.16.0-rc0'``,
``keras.__version__ = '3.0.5'``, and a prompt's ``>>> tf.__version__`` (or ``print(tf.__version__)``)
answered on the next line by ``'2.4.1'``.
What the interpreter printed is the version that ran, worth more than one typed in a sentence.

Every pattern is bounded; each line is searched to ``MAX_SCANNED``."""

from __future__ import annotations

import re

from mgpu_doctor.pasted.text import MAX_SCANNED, RANK_TOOL, Found

# The module's name as people import it, and where its version lives.
_MODULE = (r"(?<![\w.])(?P<module>tf\.keras|tensorflow\.keras|tf|tensorflow|keras)"
           r"\.(?:__version__|version\.VERSION|VERSION)(?![\w.])")
_VALUE = (r"['\"]?v?(?P<v>\d{1,4}(?:\.\d{1,6}){1,3}(?:-?rc\d{1,3}|[.-]?dev\d{0,10}|\.post\d{1,4})?)['\"]?"
          r"(?![\w.]*\d)")
# "tf.__version__  =   '2.16.0-rc0'": the name and what it printed on one line.
_SAME_LINE = re.compile(rf"{_MODULE}\)?\s{{0,6}}(?:=|:|->)\s{{0,6}}{_VALUE}")
# ">>> tf.__version__", "print(keras.__version__)": the value is the next line, alone.
_ASKED = re.compile(
    rf"^\W{{0,12}}(?:>>>\s{{0,3}}|In \[\d{{1,6}}\]:\s{{0,3}})?(?:print\()?{_MODULE}\)?\W{{0,6}}$")
_ANSWER = re.compile(rf"^\W{{0,6}}(?:Out\[\d{{1,6}}\]:\s{{0,3}})?{_VALUE}\W{{0,6}}$")
_WHAT = {"tf": "tensorflow", "tensorflow": "tensorflow", "keras": "keras", "tf.keras": "keras",
         "tensorflow.keras": "keras"}
KIND = "Versions the interpreter printed"


def find_printed_versions(lines: list[str]) -> list[Found]:
    """One part for every version printed by ``module.__version__`` (the first of each package wins)."""
    out = Found(KIND, 0, 0, RANK_TOOL)
    for i, line in enumerate(lines):
        text = line[:MAX_SCANNED]
        if "version" not in text.lower():
            continue
        printed = [(m.group("module"), m.group("v")) for m in _SAME_LINE.finditer(text)]
        asked = _ASKED.match(text) if not printed else None
        answer = _ANSWER.match(lines[i + 1][:MAX_SCANNED]) if asked and i + 1 < len(lines) else None
        if asked and answer:
            printed = [(asked.group("module"), answer.group("v"))]
        for module, version in printed:
            what = _WHAT[module.lower()]
            out.used += [i, i + 1] if answer else [i]
            if what not in out.versions:
                out.versions[what] = version
                out.version_lines[what] = i + 1 if answer else i
            out.facts.append(f"{what}: {version} (line {i + (2 if answer else 1)}, printed by {module})")
    if not out.used:
        return []
    out.used = sorted(set(out.used))
    out.first, out.last = out.used[0], out.used[-1]
    return [out]
