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

# What a name in a sentence states. A name glued to a package's ("tf.keras", "nccl-tests",
# "tensorflow/tensorflow:…", "tensorflow-estimator") is not that package's version.
_MENTION = re.compile(
    r"(?i)(?<![\w/.\\-])(?P<name>tensorflow[-_]gpu|tensorflow|tf[-_]nightly(?:[-_]gpu)?|tf|keras|python"
    r"|cuda[ _-]?toolkit|cuda"
    r"|cudnn|nccl|horovod|open ?mpi|nvidia[ -]drivers?|drivers?)"
    r"(?P<key>\s{0,3}(?:version|ver\.?)(?![a-z]))?"
    r"(?P<sep>\s{0,3}(?:==?|:|\bis\b|-)?\s{0,3})"
    r"v?(?P<v>\d{1,4}(?:\.\d{1,6}){0,3}(?:-?rc\d{1,3}|[.-]?dev\d{0,10}|\.post\d{1,4})?)(?![\w.]{0,40}\d)")
_NAMES = {"tensorflow": "tensorflow", "tensorflow-gpu": "tensorflow", "tensorflow_gpu": "tensorflow",
          "tf-nightly": "tensorflow", "tf-nightly-gpu": "tensorflow", "tf": "tensorflow", "keras": "keras",
          "python": "python",
          "cuda": "cuda",
          "cudatoolkit": "cuda", "cuda toolkit": "cuda", "cuda-toolkit": "cuda", "cuda_toolkit": "cuda",
          "cudnn": "cudnn", "nccl": "nccl", "horovod": "horovod", "openmpi": "mpi", "open mpi": "mpi",
          "nvidia driver": "driver", "nvidia-driver": "driver", "driver": "driver",
          "nvidia drivers": "driver",
          "nvidia-drivers": "driver", "drivers": "driver"}
# A major alone ("CUDA8", "cudnn-7", "cuDNN 7") is a version for these; "Python 3", "TF 2" say too little.
_MAJOR_ALONE = {"cuda": range(5, 14), "cudnn": range(5, 10)}
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
_REMOVED_ITEM = re.compile(r"^-- [\w-]")
_ADDED_ITEM = re.compile(r"^\+- [\w-]")
_HEADING_END = re.compile(r":\s{0,3}[*_`]{0,3}\s{0,3}$")
_MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
KIND = "Versions in prose"
OLD_SETUP = "a set-up the text calls old or working"


def find_prose(lines: list[str], covered: set[int], old: dict[int, int] | None = None) -> list[Found]:
    """One part for the versions the text says in its own words (lines no other part read), and the
    versions of the set-ups it calls old or working (in ``previous``)."""
    out = Found(KIND, 0, 0, RANK_PROSE)
    old = previous_lines(lines) if old is None else old  # the caller's, where it has them
    used: set[int] = set()
    for i, line in enumerate(lines):
        if i in covered or not line.strip():
            continue
        text = line[:MAX_SCANNED]
        cut = old.get(i)
        for match in _MENTION.finditer(text):
            what, version = _mention(match, text)
            if not what:
                if match.group("name").lower() in ("tensorflow", "keras", "cuda", "cudnn"):
                    out.unread.append(i)
                continue
            used.add(i)
            if cut is not None and match.start() < cut:
                out.previous.append(f"{what} {version} (line {i + 1}: {OLD_SETUP})")
            elif what == "cuda" and match.group("key") and re.search(r"(?i)driver", text[:match.start()]):
                out.facts.append(f"the driver supports CUDA {version} (line {i + 1}): not the CUDA runtime")
            elif what not in out.versions:
                out.versions[what] = version
                out.version_lines[what] = i
                out.facts.append(f"{what}: {version} (line {i + 1})")
            elif out.versions[what] != version:
                out.facts.append(f"{what}: also {version} (line {i + 1})")
        if i not in used and _RANGE_AFTER.search(text) and _mention_name(text):
            out.unread.append(i)
    out.unread = sorted(set(out.unread) - used)
    if not used:
        return []
    out.used = sorted(used)
    out.first, out.last = out.used[0], out.used[-1]
    if out.previous:
        out.facts.append(f"{len(out.previous)} version(s) of a set-up the text calls old or working, "
                         "not taken as installed")
    return [out]


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
    after_key = match.end("key") if match.group("key") else match.end("name")
    if _RANGE_AFTER.match(text, match.end("name")) or _RANGE_AFTER.match(text, after_key):
        return "", ""
    if what in ("tensorflow", "keras", "python") and name in ("tf", "python") and "." not in version:
        return "", ""
    if "." not in version:
        allowed = _MAJOR_ALONE.get(what)
        if allowed is None or int(version) not in allowed or ":" in match.group("sep"):
            return "", ""
    if what in ("tensorflow", "keras") and "." not in version:
        return "", ""
    if what == "driver" and not re.fullmatch(r"\d{3}(?:\.\d+){1,2}", version):
        return "", ""
    return what, version
