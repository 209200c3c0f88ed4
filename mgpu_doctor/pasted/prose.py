"""Versions said in sentences and lists rather than printed by a tool: "TensorFlow version 2.1.0",
"tf1.12.0", ``pip install tensorflow-gpu==1.15.0``, a conda environment's ``- tensorflow-gpu=1.11.0``,
a requirement pin, "1. TensorFlow 1.15", and the set-ups the text calls old or working ("this works:",
"previously I used", "Old environment:"), which are kept apart from what is installed.

Every pattern here is bounded (each line is searched to ``MAX_SCANNED`` characters, every repeat has
a limit), so reading stays linear in the length of the paste.
"""

from __future__ import annotations

import re

from mgpu_doctor.pasted.text import MAX_SCANNED, RANK_PROSE, Found

_NAME = (r"(?P<name>tensorflow[-_]gpu|tensorflow|tf[-_]nightly(?:[-_]gpu)?|tf|keras|python"
         r"|cuda[ _-]?toolkit|cuda|cudnn|nccl|horovod|open ?mpi|mpich|nvidia[ -]drivers?|drivers?)")
_V = r"\d{1,4}(?:\.\d{1,6}){0,3}(?:-?rc\d{1,3}|[.-]?dev\d{0,10}|\.post\d{1,4})?"
# What a name in a sentence states. A name glued to a package's ("tf.keras", "nccl-tests",
# "tensorflow/tensorflow:…", "tensorflow-estimator") is not that package's version.
_MENTION = re.compile(
    rf"(?i)(?<![\w/.\\-]){_NAME}"
    r"(?P<key>\s{0,3}(?:version|ver\.?)(?![a-z]))?"
    # a value may stand in a code span: "Nvidia-driver `430.40`"
    r"(?P<sep>\s{0,3}(?:==?|:|\bis\b|-)?\s{0,3}[`'\"*]{0,2})"
    rf"v?(?P<v>{_V})(?![\w.]{{0,40}}\d)")
# A change the text says it made: "upgraded the host nvidia driver to 375.39", "updated the gpu driver from
# 375.26 to 375.39": the version it went to is the one there now, the one it came from is old.
_CHANGED_TO = re.compile(
    rf"(?i)(?<![\w/.\\-]){_NAME}(?P<key>\s{{0,3}}(?:version|ver\.?)(?![a-z]))?"
    rf"(?P<sep>\s{{1,3}}(?:from\s{{1,3}}[`'\"]?v?(?P<old>{_V})[`'\"]?\s{{1,3}})?to\s{{1,3}}[`'\"]?)"
    rf"v?(?P<v>{_V})(?![\w.]{{0,40}}\d)")
# ... said as done: "going to try to downgrade the drivers to 550" names a version not there yet.
_CHANGED = re.compile(r"(?i)\b(?:upgraded|updated|downgraded|switched|changed|moved)\b")
# An apt package of a CUDA release: "cuda-toolkit-11-2", "cuda-11-8" (its minor after a dash).
_APT_MINOR = re.compile(r"-(?P<minor>\d{1,2})(?![\w.])")
_NAMES = {"tensorflow": "tensorflow", "tensorflow-gpu": "tensorflow", "tensorflow_gpu": "tensorflow",
          "tf-nightly": "tensorflow", "tf-nightly-gpu": "tensorflow", "tf": "tensorflow", "keras": "keras",
          "python": "python",
          "cuda": "cuda",
          "cudatoolkit": "cuda", "cuda toolkit": "cuda", "cuda-toolkit": "cuda", "cuda_toolkit": "cuda",
          "cudnn": "cudnn", "nccl": "nccl", "horovod": "horovod", "openmpi": "openmpi", "open mpi": "openmpi",
          "mpich": "mpich",
          "nvidia driver": "driver", "nvidia-driver": "driver", "driver": "driver",
          "nvidia drivers": "driver",
          "nvidia-drivers": "driver", "drivers": "driver"}
# A major alone ("CUDA8", "cudnn-7", "cuDNN 7") is a version for these; "Python 3", "TF 2" say too little.
_MAJOR_ALONE = {"cuda": range(5, 14), "cudnn": range(5, 10)}
# A version's local label ("NCCL_VERSION=2.4.8-1+cuda10.0"): the CUDA it was built for, not one installed.
_LOCAL_LABEL_BEFORE = re.compile(r"(?:^|[\s=:'\"(])v?\d[\w.-]{0,30}\+$")
# A requirement with a range ("keras>=2.4,<2.5") says what is allowed, not what is installed.
_RANGE_AFTER = re.compile(r"\s{0,3}(?:>=|<=|~=|!=|<|>)")
# The text calls a set-up old or working: its versions are not the installed ones.
_PREVIOUS = re.compile(
    r"(?i)\b(?:previous(?:ly)?|used to (?:use|have|run)|(?:was|were|had been) (?:using|on)"
    r"|(?:had|used) before"
    r"|old (?:env(?:ironment)?|set-?up|versions?|config(?:uration)?|install(?:ation)?|machine)"
    r"|(?:this|that|it) (?:works|worked)|works (?:fine|well)|worked (?:fine|well|before|with)"
    r"|working (?:env(?:ironment)?|set-?up|config(?:uration)?|versions?)|works:|worked:"
    r"|before (?:the |my |i )?(?:upgrad|updat)\w{0,3}|\d{1,3} (?:days?|weeks?|months?|years?) ago"
    r"|downgrad\w{0,3} (?:to|back to))\b")
_NOT_WORKING = re.compile(r"(?i)\b(?:not|n't|never|no longer)\s{1,3}(?:\w{1,10}\s{1,3})?work")
# ... and where it goes back to the set-up that fails: "now", "current", "new environment".
_CURRENT = re.compile(
    r"(?i)\b(?:now|current(?:ly)?|new (?:env(?:ironment)?|set-?up|versions?|config(?:uration)?|machine)"
    r"|after (?:the |my )?(?:upgrad|updat)\w{0,3}|today|but (?:with|on|in)|upgraded to|updated to)\b")
# Words that make the versions of their clause something other than installed: a requirement, a support
# range or what a program looks for ("CUDA 10.0 requires driver 410", "the highest supported CUDA version is
# 11.2", "tensorflow was looking for CUDA 11 libraries"), and an install that failed or was undone.
_WANTED = re.compile(
    r"(?i)\b(?:requires?|required|expects?|supports|supported|compatible|looking for|looks for"
    r"|(?:compiled|built) (?:for|with|against))\b")
_NOT_INSTALLED = re.compile(
    r"(?i)\b(?:uninstall(?:ed|ing)?|could not find a version|no matching distribution"
    r"|(?:could not|couldn't|cannot|can't|unable to|failed to) install)\b")
# An example: its reach is the rest of the sentence, or of the parenthesis it opens in.
_EXAMPLE = re.compile(r"(?i)\b(?:for example|for instance|e\.g\.?|such as)(?![\w])")
_SUPPORT_AFTER = re.compile(r"(?i)\s{0,3}support\b")  # "thus cuda 12.2 support": what a driver allows
_CLAUSE_END = re.compile(r"[;,()?!]|\.(?=\s|$)|\s(?:and|but|while|whereas|so)\s", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[?!;]|\.(?=\s|$)")
# "CUDA and cuDNN: 7.5 and 4", "cuda/cudnn version 10.1 / 7.6": two names, then their two versions in order.
_PAIR = re.compile(
    r"(?i)(?<![\w/.-])(?P<a>tensorflow|keras|python|cuda|cudnn)\s{0,3}(?:and|/|&)\s{0,3}"
    r"(?P<b>tensorflow|keras|python|cuda|cudnn)\b[^:=\n]{0,40}?[:=]?\s{0,3}"
    r"v?(?P<va>\d{1,4}(?:\.\d{1,6}){0,3})\s{0,3}(?:and|/|&|,)\s{0,3}v?(?P<vb>\d{1,4}(?:\.\d{1,6}){0,3})(?![\w.]{0,40}\d)")
# A CUDA toolkit's own directory in a path ("/usr/local/cuda-11.1/lib64", "...\\CUDA\\v10.1\\bin"): a toolkit
# installed there, worth less than any version stated (split.py takes it only where nothing else names CUDA).
_CUDA_DIRECTORY = re.compile(r"(?i)(?:/cuda-|\\cuda\\v)(?P<v>\d{1,2}\.\d{1,2})(?=[/\\]|[\s'\"`:;,)]|$)")
_REMOVED_ITEM = re.compile(r"^-- [\w-]")
_ADDED_ITEM = re.compile(r"^\+- [\w-]")
_HEADING_END = re.compile(r":\s{0,3}[*_`]{0,3}\s{0,3}$")
_MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
KIND = "Versions in prose"
OLD_SETUP = "a set-up the text calls old or working"
WANTED = "a version the text names as required, supported or an example"
NOT_INSTALLED = "a version the text could not install or removed"
CHANGED_FROM = "the version the text says it changed from"


def find_prose(lines: list[str], covered: set[int], old: dict[int, int] | None = None) -> list[Found]:
    """One part for the versions the text says in its own words (lines no other part read), and the
    versions of the set-ups it calls old or working (in ``previous``)."""
    out = Found(KIND, 0, 0, RANK_PROSE)
    old = previous_lines(lines) if old is None else old  # the caller's, where it has them
    used: set[int] = set()
    failed = _failed_installs(lines, covered)
    for i, line in enumerate(lines):
        if i in covered or not line.strip():
            continue
        text = line[:MAX_SCANNED]
        cut = old.get(i)
        pairs = list(_pairs(text))
        for match in _mention_matches(text, pairs):
            what, version = _mention(match, text) if isinstance(match, re.Match) else match[2:]
            if what and isinstance(match, re.Match) and match.re is _CHANGED_TO and match.group("old"):
                out.previous.append(f"{what} {match.group('old')} (line {i + 1}: {CHANGED_FROM})")
            start, end = (match.start(), match.end()) if isinstance(match, re.Match) else match[:2]
            if not what:
                if isinstance(match, re.Match) and match.group("name").lower() in (
                        "tensorflow", "keras", "cuda", "cudnn"):
                    out.unread.append(i)
                continue
            used.add(i)
            apart = _set_apart(text, start, end) or (NOT_INSTALLED if (what, version) in failed else "")
            if cut is not None and start < cut:
                out.previous.append(f"{what} {version} (line {i + 1}: {OLD_SETUP})")
            elif apart:
                out.previous.append(f"{what} {version} (line {i + 1}: {apart})")
            elif (what == "cuda" and isinstance(match, re.Match) and match.group("key")
                  and re.search(r"(?i)driver", text[:start])):
                out.facts.append(f"the driver supports CUDA {version} (line {i + 1}): not the CUDA runtime")
            elif what not in out.versions:
                out.versions[what] = version
                out.version_lines[what] = i
                out.facts.append(f"{what}: {version} (line {i + 1})")
            elif out.versions[what] != version:
                out.facts.append(f"{what}: also {version} (line {i + 1})")
        directory = _CUDA_DIRECTORY.search(text)
        if directory and "cuda_directory" not in out.versions and (cut is None or directory.start() >= cut):
            used.add(i)
            out.versions["cuda_directory"] = directory.group("v")
            out.version_lines["cuda_directory"] = i
            out.facts.append(f"a CUDA {directory.group('v')} directory (line {i + 1})")
        if i not in used and _RANGE_AFTER.search(text) and _mention_name(text):
            out.unread.append(i)
    out.unread = sorted(set(out.unread) - used)
    if not used:
        return []
    out.used = sorted(used)
    out.first, out.last = out.used[0], out.used[-1]
    if out.previous:
        out.facts.append(f"{len(out.previous)} version(s) the text calls old or working, requires, supports, "
                         "gives as an example, could not install or removed: not taken as installed")
    return [out]


def _pairs(text: str) -> list[tuple[int, int, str, str, str, str]]:
    """(start, end, what, version, what, version) for "CUDA and cuDNN: 7.5 and 4"."""
    return [(m.start(), m.end(), _NAMES[m.group("a").lower()], m.group("va"), _NAMES[m.group("b").lower()],
             m.group("vb")) for m in _PAIR.finditer(text) if m.group("a").lower() != m.group("b").lower()]


def _mention_matches(text: str, pairs: list[tuple[int, int, str, str, str, str]]
                     ) -> list[re.Match[str] | tuple[int, int, str, str]]:
    """The mentions of a line in order: a pair's two versions each, every other mention outside a pair."""
    out: list[re.Match[str] | tuple[int, int, str, str]] = []
    for start, end, what_a, version_a, what_b, version_b in pairs:
        out += [(start, end, what, version) for what, version in ((what_a, version_a), (what_b, version_b))
                if "." in version or what in _MAJOR_ALONE]
    out += [m for m in _MENTION.finditer(text) if not any(p[0] <= m.start() < p[1] for p in pairs)]
    for m in _CHANGED_TO.finditer(text):
        sentence_start, _ = _span(text, m.start(), m.end(), _SENTENCE_END)
        if _CHANGED.search(text, sentence_start, m.start()) and not any(
                p[0] <= m.start() < p[1] for p in pairs):
            out.append(m)
    return sorted(out, key=lambda m: m.start() if isinstance(m, re.Match) else m[0])


def _span(text: str, start: int, end: int, boundary: re.Pattern[str]) -> tuple[int, int]:
    """The stretch of ``text`` around start..end up to the nearest ``boundary`` on each side."""
    left = 0
    for m in boundary.finditer(text, 0, start):
        left = m.end()
    right = boundary.search(text, end)
    return left, right.start() if right else len(text)


def _set_apart(text: str, start: int, end: int) -> str:
    """Why the version at start..end is not an installed one ("" when nothing says so): its clause
    requires, supports or looks for it, or could not install or removed it; an example precedes it in its
    sentence; "support" follows it."""
    left, right = _span(text, start, end, _CLAUSE_END)
    clause = text[left:right]
    if _NOT_INSTALLED.search(clause):
        return NOT_INSTALLED
    if _WANTED.search(clause) or _SUPPORT_AFTER.match(text, end):
        return WANTED
    sentence_start, _ = _span(text, start, end, _SENTENCE_END)
    for example in _EXAMPLE.finditer(text, sentence_start, start):
        close = text.find(")", example.end(), start)
        opened = text.rfind("(", sentence_start, example.start()) > text.rfind(")", sentence_start,
                                                                                example.start())
        if not (opened and close != -1):
            return WANTED
    return ""


def _failed_installs(lines: list[str], covered: set[int]) -> set[tuple[str, str]]:
    """(what, version) that pip says it could not find or install ("No matching distribution found for
    tensorflow-gpu==1.15.0"): its "Collecting tensorflow-gpu==1.15.0" line installed nothing either."""
    out: set[tuple[str, str]] = set()
    for i, line in enumerate(lines):
        text = line[:MAX_SCANNED]
        if i in covered or not _NOT_INSTALLED.search(text):
            continue
        for match in _MENTION.finditer(text):
            what, version = _mention(match, text)
            if what and _set_apart(text, match.start(), match.end()) == NOT_INSTALLED:
                out.add((what, version))
    return out


def previous_lines(lines: list[str]) -> dict[int, int]:
    """The lines that speak of a set-up the text calls old or working -> where on the line that ends
    (the position of a following "now"; the line's length where nothing follows). A heading such as
    "Old environment:" or "this works:" makes the block under it old, up to a blank line after its
    content, the next heading or a "now"/"new environment"."""
    out: dict[int, int] = {}
    block = False
    # A changed conda environment.yml shown as a diff: its removed items ("-- tensorflow=2.1.0") are the
    # old set-up, its added ones ("+- tensorflow==2.2.0") the new.
    yaml_diff = (any(_ADDED_ITEM.match(line) for line in lines)
                 and any(_REMOVED_ITEM.match(line) for line in lines))
    for i, line in enumerate(lines):
        if yaml_diff and _REMOVED_ITEM.match(line):
            out[i] = len(line[:MAX_SCANNED])
            continue
        text = line[:MAX_SCANNED]
        if not text.strip():
            block = block and _still_opening(lines, i)
            continue
        heading = bool(_HEADING_END.search(text) or _MARKDOWN_HEADING.match(text))
        cut = _is_previous(text)
        if cut is None and block and not heading:
            current = _CURRENT.search(text)
            if current:
                block = False
                if current.start() > 0:
                    out[i] = current.start()
            else:
                out[i] = len(text)
        elif cut is not None:
            out[i] = cut
        if heading:
            block = cut is not None and cut == len(text)
    return out


def _still_opening(lines: list[str], i: int) -> bool:
    """A blank line right after a heading ("Old environment:", a fence taken off) keeps the block open;
    a blank line after its content closes it."""
    before = next((lines[j] for j in range(i - 1, max(-1, i - 3), -1) if lines[j].strip()), "")
    return bool(_HEADING_END.search(before[:MAX_SCANNED]) or _MARKDOWN_HEADING.match(before))


def _is_previous(text: str) -> int | None:
    """Where the words about an old or working set-up end their reach on this line (the position of a
    following "now"/"current"), or None when the line does not call anything old or working."""
    match = _PREVIOUS.search(text)
    if match is None or (_NOT_WORKING.search(text) and "work" in match.group(0).lower()):
        return None
    current = _CURRENT.search(text, match.end())
    return current.start() if current else len(text)


def _mention_name(text: str) -> bool:
    return bool(re.search(r"(?i)(?<![\w/.-])(?:tensorflow(?:-gpu)?|keras|cuda|cudnn)\b", text))


def _mention(match: re.Match[str], text: str) -> tuple[str, str]:
    """(what, version) for a mention, or ("", "") when it is not a version of that package."""
    name = re.sub(r"\s+", " ", match.group("name").lower())
    what = _NAMES.get(name, "") or _NAMES.get(name.replace("_", "-"), "")  # tf_nightly_gpu, pip's spelling
    version = match.group("v")
    apt = _APT_MINOR.match(text, match.end())
    if what == "cuda" and apt and "." not in version and match.group("sep").strip() == "-":
        version = f"{version}.{apt.group('minor')}"  # "cuda-toolkit-11-2": CUDA 11.2
    after_key = match.end("key") if match.group("key") else match.end("name")
    if _RANGE_AFTER.match(text, match.end("name")) or _RANGE_AFTER.match(text, after_key):
        return "", ""
    if _LOCAL_LABEL_BEFORE.search(text, max(0, match.start() - 40), match.start()):
        return "", ""
    if what in ("tensorflow", "keras", "python") and name in ("tf", "python") and "." not in version:
        return "", ""
    if "." not in version and what != "driver":
        allowed = _MAJOR_ALONE.get(what)
        if allowed is None or int(version) not in allowed or ":" in match.group("sep"):
            return "", ""
    if what in ("tensorflow", "keras") and "." not in version:
        return "", ""
    if what == "driver" and not re.fullmatch(r"\d{3}(?:\.\d+){1,2}", version) and not (
            # a driver branch alone ("the nvidia driver is 535"): three digits, from release 180 on
            re.fullmatch(r"\d{3}", version) and int(version) >= 180 and ":" not in match.group("sep")):
        return "", ""
    return what, version
