"""The "System information" block of the TensorFlow and Keras issue templates (the 1.x template's
bold keys, the 2.x template's plain ones, the issue forms' headings) and Horovod's "Environment"."""

from __future__ import annotations

import functools
import re

from mgpu_doctor.pasted.text import RANK_TEMPLATE, Found, cudnn_from_number, first_version, stated

# A key of the templates (matched at the start of the key, case-insensitive) -> what it states.
KEYS = (
    ("tensorflow version", "tensorflow"), ("tensorflow-gpu version", "tensorflow"),
    ("tf version", "tensorflow"), ("keras version", "keras"), ("python version", "python"),
    ("cuda/cudnn version", "cuda/cudnn"), ("cuda / cudnn version", "cuda/cudnn"), ("cuda version", "cuda"),
    ("cudnn version", "cudnn"), ("nccl version", "nccl"), ("gpu model and memory", "gpu"),
    ("gpu model", "gpu"), ("os platform and distribution", "os"), ("os and version", "os"),
    ("os", "os"), ("tensorflow installed from", "installed-from"), ("framework version", "framework-version"),
    ("framework", "framework"), ("horovod version", "horovod"), ("mpi version", "mpi"),
    ("bazel version", "bazel"), ("gcc/compiler version", "compiler"), ("gcc version", "compiler"),
    ("have i written custom code", "custom-code"), ("mobile device", "mobile"),
    ("custom code", "custom-code"),
    ("source", "installed-from"), ("current behavior", None), ("exact command to reproduce", None),
    ("cmake version", None), ("spark / pyspark version", None), ("ray version", "ray"),
    ("nvidia driver version", "driver"), ("driver version", "driver"),
    # The short forms people type instead of the template ("Python: 3.9.0", "CUDA: 11.2").
    ("tensorflow", "tensorflow"), ("tensorflow-gpu", "tensorflow"), ("tf", "tensorflow"), ("keras", "keras"),
    ("python", "python"), ("cuda", "cuda"), ("cudnn", "cudnn"), ("nccl", "nccl"), ("horovod", "horovod"),
    ("gpu", "gpu"), ("driver", "driver"), ("nvidia driver", "driver"), ("nvidia-smi", "driver"),
)
# What the Horovod template prints as the question itself (answered on the next line, or not at all).
_HINTS = ("(tensorflow, keras, pytorch, mxnet)",)
# No two runs of blanks are adjacent in these patterns (``\s*(?:\*\*)?\s*`` would try every split of a
# long run of blanks: quadratic on a line of them); a test times every pattern on 16 KiB lines.
_LINE = re.compile(r"^\s*(?:(?:[-*+]|\d+\.)\s*)?(?:\*\*|__)?(?P<key>[A-Za-z][^:*_]{1,160}?)"
                   r"\s*(?:(?:\*\*|__)\s*)?:\s*(?:(?:\*\*|__)\s*)?(?P<value>.*)$")
_HEADING = re.compile(r"^\s*#{2,4}\s*(?P<key>[A-Za-z][^#]{1,80}?)\s*#*\s*$")
_BLOCK_TITLE = re.compile(r"^\s*(?:#+\s*)?(?:\*\*\s*)?(system information|environment)\b", re.IGNORECASE)
_PACKAGE_ROW = re.compile(r"^\s*[-*]\s+(?:tensorflow|tensorflow-gpu|tf-nightly)\s+(?P<version>\d+\.\d+[\w.]*)"
                          r"(\s+\S+)*\s*$")
_NEVER_A_KEY = re.compile(r"^\s*(?:$|\d+(?!\.\s)|[|+=<\[]|[IWEF]\d{4})")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+\S")
MAX_BLOCK_LINES = 400
_VERSION_KEYS = ("tensorflow", "keras", "python", "cuda", "cudnn", "nccl", "driver", "horovod", "mpi",
                 "openmpi", "mpich", "ray")
# Horovod's "MPI version" answer names the library or not ("mpirun (Open MPI) 3.1.0", "MPICH 3.3", "4.0.1"):
# Open MPI and MPICH number their releases independently, so a bare number stays `mpi`, matched by nothing.
_MPI_NAMES = (("openmpi", re.compile(r"(?i)\bopen[ -]?mpi\b")), ("mpich", re.compile(r"(?i)\bmpich\b")))
# A requirement typed as the answer (">=2.2", "> =2.2", "<3.11") says what would do, not what is installed.
_REQUIREMENT = re.compile(r"^\s*(?:[<>~!]\s?=?|=(?!=))\s?v?\d")


@functools.lru_cache(maxsize=4096)  # a long paste repeats the same few keys
def _key(text: str) -> str | None | bool:
    """What a template key states; None for a template key without a fact; False: not a key."""
    text = " ".join(text.strip().strip("*_` ").lower().split())
    text = text.split("(", 1)[0].rstrip()  # "(use command below)", "(e.g., Linux Ubuntu 16.04)"
    for key, what in KEYS:
        if text == key or (len(key) > 6 and text.startswith(key)):
            return what
    return False


def find_system_info(lines: list[str]) -> list[Found]:
    """Every template block. A block that failed having read lines start..k is not read again from
    each line up to k (each time the same lines: quadratic in a long text of "Key: value" lines);
    only a title line ("System information", "Environment:") starts a new try inside that span."""
    found: list[Found] = []
    i, looked = 0, -1
    while i < len(lines):
        if i <= looked and not _BLOCK_TITLE.match(lines[i]):
            i += 1
            continue
        block, seen = _read_block(lines, i)
        if block is None:
            looked = max(looked, seen)
            i += 1
            continue
        found.append(block)
        i = block.last + 1
    return found


def _read_block(lines: list[str], start: int) -> tuple[Found | None, int]:
    """The template block that starts at ``start`` (a title line or its first key), if any, and the
    last line looked at."""
    line = lines[start]
    # A block starts at a title, a "## Heading" or a "Key: value" line: most lines of a long paste are
    # none of these, and are passed over without the patterns below.
    if _NEVER_A_KEY.match(line) or (":" not in line and "#" not in line and not _BLOCK_TITLE.match(line)):
        return None, start
    values: dict[str, tuple[str, int]] = {}
    style = ""
    i = start
    first = start
    titled = bool(_BLOCK_TITLE.match(lines[i]) and _key(lines[i].split(":")[0]) is False)
    if titled:
        i += 1
    last = start
    gap = loose = 0
    # A template is some 40 lines: a block read no further, or a text of 100,000 "Key: value" lines
    # that never makes a block would be read again from each of its lines (quadratic).
    end = min(len(lines), start + MAX_BLOCK_LINES)
    while i < end and gap <= 2:
        line = lines[i]
        heading = _HEADING.match(line)
        match = _LINE.match(line)
        what = _key(heading.group("key")) if heading else _key(match.group("key")) if match else False
        if what is False:
            if not line.strip():
                gap += 1 if style != "form" else 0
                i += 1
                continue
            if style == "form" and values and not _HEADING.match(line):
                gap += 1
                i += 1
                continue
            row = _PACKAGE_ROW.match(line)
            if (style or titled) and row:  # "- tensorflow-gpu   1.4.1   pypi_0   pypi": a conda row
                values.setdefault("tensorflow", (row.group("version"), i))
                last = i
                i += 1
                continue
            if (match or _BULLET.match(line)) and (values or titled):  # a question the doctor does not read
                last = i
                i += 1
                continue
            if style and values and loose < 2:  # an answer that runs over a second line
                loose += 1
                i += 1
                continue
            break
        gap = loose = 0
        if heading:
            if style and style != "form":
                break
            style = "form"
            value, j = _form_value(lines, i + 1)
            if isinstance(what, str) and stated(value):
                values.setdefault(what, (value, i))
            last = max(i, j - 1 if j > i + 1 else i)
            i = j
            continue
        assert match is not None
        if style == "form":
            break
        if not style:
            bold = "**" in line.split(":")[0]
            style = "1.x" if bold else "2.x" if _BULLET.match(line) or titled else "typed"
        value = match.group("value")
        if value.strip().lower() in _HINTS:
            value = ""
        following = lines[i + 1] if i + 1 < len(lines) else ""
        next_key = _LINE.match(following)
        answer = (following.strip() and not _HEADING.match(following) and not _BULLET.match(following)
                  and not following.lstrip().startswith(("|", "+", "`", "=", "<"))
                  and (next_key is None or _key(next_key.group("key")) is False))
        if not value.strip() and answer:
            value = lines[i + 1]  # Horovod's template answered on the next line
            i += 1
        if isinstance(what, str) and stated(value):
            values.setdefault(what, (value.strip().strip("*` "), i))
        last = i
        i += 1
    telling = {"tensorflow", "python", "cuda/cudnn", "cuda", "cudnn", "gpu", "keras", "horovod",
               "framework-version"}
    if len(values) < 2 and not (values.keys() & {"tensorflow", "cuda/cudnn"}) or not (set(values) & telling):
        return None, max(last, i - 1)
    framework = values.get("framework", ("", 0))[0].lower()
    kind = {"1.x": "System information (TensorFlow 1.x template)",
            "2.x": "System information (TensorFlow 2.x template)",
            "form": "System information (issue form)", "typed": "Versions as typed"}[style]
    if "horovod" in values:
        kind = "Environment (Horovod template)"
    elif "keras" in values and "tensorflow" not in values:
        kind = kind.replace("TensorFlow", "Keras")
    out = Found(kind, first, last, RANK_TEMPLATE)
    for what, (value, at) in values.items():
        out.facts.append(f"{what}: {value}")
        if what == "mpi":
            what = next((key for key, named in _MPI_NAMES if named.search(value)), what)
        for key in {"cuda/cudnn": ("cuda", "cudnn"), "framework-version": ("tensorflow",)}.get(what, (what,)):
            out.version_lines[key] = at
        if what in _VERSION_KEYS + ("cuda/cudnn", "framework-version") and _REQUIREMENT.match(value):
            out.facts[-1] += " (a requirement, not an installed version)"
        elif what in _VERSION_KEYS:
            version = first_version(value)
            if version and (what != "python" or "." in version):  # "Python 3" says too little
                out.versions[what] = cudnn_from_number(version) if what == "cudnn" else version
        elif what == "cuda/cudnn":
            cuda, cudnn = split_cuda_cudnn(value)
            if cuda:
                out.versions.setdefault("cuda", cuda)
            if cudnn:
                out.versions.setdefault("cudnn", cudnn_from_number(cudnn))
            if not (cuda or cudnn) and first_version(value):
                out.facts[-1] += " (CUDA's or cuDNN's: cannot tell)"
        elif what == "framework-version":
            version = first_version(value)
            if ("tensorflow" in framework or "keras" in framework or not framework) and version.startswith(
                    ("1.", "2.")):
                out.versions.setdefault("tensorflow", version)
            else:
                continue  # another framework's version: nothing to read, nothing unread
        elif what == "os":
            out.os_release = value
        if what in _VERSION_KEYS + ("cuda/cudnn", "framework-version") and not out.versions.keys() & (
                {what} | ({"cuda", "cudnn"} if what == "cuda/cudnn" else set())
                | ({"tensorflow"} if what == "framework-version" else set())):
            out.unread.append(at)
    return out, out.last


def _form_value(lines: list[str], start: int) -> tuple[str, int]:
    """An issue form's answer: the lines after its heading, up to the next heading."""
    parts: list[str] = []
    i = start
    while i < len(lines) and not _HEADING.match(lines[i]):
        if lines[i].strip() and len(parts) < 3:
            parts.append(lines[i].strip())
        i += 1
        if len(parts) >= 3 and i - start > 6:
            break
    return " ".join(parts), i


def split_cuda_cudnn(value: str) -> tuple[str, str]:
    """"11.2/8.1", "CUDA 8.0, cuDNN 5.1", "cuda 10.1 cudnn 7.6.5" -> ("11.2", "8.1")."""
    low = value.lower()
    if "cudnn" in low:
        at = low.index("cudnn")
        before, after = value[:at], value[at + 5:]
        # cudnn-11.2-windows-x64-v8.1.0.77 (the file's own version), "cuDNN 7", "cudnn=8.1.0.77"
        named = re.search(r"-v(\d+\.\d+[\d.]*)", after)
        right = re.match(r"[\s:=_-]*(?:version\s*:?\s*)?v?(\d+(?:\.\d+)*)", after)
        cudnn = named.group(1) if named else right.group(1) if right else ""
        before = re.sub(r"(?i)\bcuda[-_](?=\d)", " ", before)  # "cuda-11.5 ; cudnn-8.3.2.44"
        return first_version(before) if stated(before) else "", cudnn
    if "cuda" in low:  # "CUDA 12.4", "CUDA: 12.9 (cannot install < 12.8 ...)": the CUDA version alone
        return first_version(value), ""
    pieces = re.split(r"\s*[/,;|]\s*|\s+and\s+|\s+", value.strip(), maxsplit=1)
    cuda = first_version(pieces[0]) if pieces and stated(pieces[0]) else ""
    cudnn = _cudnn_of(pieces[1]) if len(pieces) > 1 and stated(pieces[1]) else ""
    if cuda and not cudnn:
        return one_of_cuda_cudnn(cuda)
    return cuda, cudnn


def _cudnn_of(piece: str) -> str:
    """The cuDNN half of a "CUDA/cuDNN" value. cuDNN has no major 10 or above: "11.2(8.1 I think)" repeats
    the CUDA version and gives cuDNN's in its parenthesis; a CUDNN_VERSION number ("7603") is cuDNN's."""
    dotted = re.findall(r"(?<![\w.])\d{1,2}(?:\.\d{1,6}){1,3}(?![\w.])", piece)
    for version in [first_version(piece)] + dotted:
        if version and (int(version.split(".")[0]) < 10 or len(version) in (4, 5) and version.isdecimal()):
            return version
    return ""


def one_of_cuda_cudnn(version: str) -> tuple[str, str]:
    """One unnamed version under a "CUDA/cuDNN" key: CUDA from 10 on (cuDNN has no 10) and with a build
    number ("8.0.61": cuDNN's patch levels are single digits), cuDNN below 7 (no TensorFlow ran on CUDA
    below 7.0); any other 7, 8 or 9 can be either, and says neither."""
    parts = version.split(".")
    major = int(parts[0])
    if major >= 10 or len(parts) > 2 and parts[2].isdecimal() and int(parts[2]) >= 10:
        return version, ""
    if major < 7:
        return "", version
    return "", ""
