"""``pip list``, ``pip freeze`` and ``conda list`` as pasted (also the lines of them that
``tf_env_collect.sh`` and PyTorch's ``collect_env`` print)."""

from __future__ import annotations

import re

from mgpu_doctor.pasted.text import RANK_PACKAGES, VERSION, Found, canonical_name, find_blocks

_NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]*"
_PIP_HEADER = re.compile(r"^\s*Package\s+Version(\s+\S+)*\s*$")
_RULE = re.compile(r"^\s*-{3,}(\s+-{3,})+\s*$")
_TOOL = r"^\s*(?:\[(?:pip3?|conda)\]\s+)?"  # collect_env's "[pip3] numpy==1.24.1"
_ROW = re.compile(rf"{_TOOL}(?P<name>{_NAME})\s+(?P<version>\d[\w.+!-]*)(?:\s+\S+){{0,3}}\s*$")
_FREEZE = re.compile(rf"{_TOOL}(?P<name>{_NAME})\s*==\s*(?P<version>{VERSION}|\d+)\s*$")
_CONDA_HEADER = re.compile(r"^\s*#\s*(packages in environment at|Name\s+Version\s+Build)", re.IGNORECASE)
# Names worth a row of their own when no header says the lines are a package list.
INTERESTING = re.compile(r"^(tensorflow.*|tf-nightly.*|tf-keras|keras.*|numpy|protobuf|h5py|ml-dtypes|"
                         r"nvidia-.*|horovod|ray|torch|jax|jaxlib|cudatoolkit|cudnn|nccl|cuda-.*|tensorrt)$")


def find_packages(lines: list[str]) -> list[Found]:
    return find_blocks(lines, _block)


def _block(lines: list[str], start: int) -> Found | None:
    line = lines[start]
    if _PIP_HEADER.match(line) or _CONDA_HEADER.match(line):
        kind = "conda list" if _CONDA_HEADER.match(line) else "pip list"
        return _rows(lines, start, start + 1, kind, header=True)
    if _FREEZE.match(line) or _ROW.match(line):
        block = _rows(lines, start, start, "pip freeze" if _FREEZE.match(line) else "pip list", header=False)
        if block is not None:
            return block
    return None


def _rows(lines: list[str], first: int, start: int, kind: str, header: bool) -> Found | None:
    out = Found(kind, first, first, RANK_PACKAGES)
    i = start
    misses = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            if out.packages or not header:
                break
            i += 1
            continue
        if _RULE.match(line) or _CONDA_HEADER.match(line) or line.lstrip().startswith("#"):
            out.last = i
            i += 1
            continue
        match = _FREEZE.match(line) or _ROW.match(line)
        if match is None:
            if not header or " @ " not in line:
                break
            misses += 1
        else:
            name = canonical_name(match.group("name"))
            out.packages.setdefault(name, match.group("version"))
            if "[conda]" in line or kind == "conda list":
                out.kind = "conda list"
        out.last = i
        i += 1
    interesting = {n for n in out.packages if INTERESTING.match(n)}
    # Without a header, a row or two of prose could look like "name 1.2": only lists naming a package
    # the doctor knows, or long lists, count.
    # One row without a header ("Tensorflow 1.10") is a sentence: the prose reader reads it.
    few = len(out.packages) < 2 or not interesting and len(out.packages) < 5
    if not out.packages or (not header and few):
        return None
    rows = [lines[j] for j in range(start, out.last + 1) if lines[j].strip()]
    if kind == "pip list" and all(_FREEZE.match(row) for row in rows):
        out.kind = "pip freeze"
    out.facts = [f"{n}: {v}" for n, v in sorted(out.packages.items()) if n in interesting]
    out.facts.append(f"{len(out.packages)} packages")
    return out
