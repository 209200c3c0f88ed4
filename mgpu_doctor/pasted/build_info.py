"""``tf.sysconfig.get_build_info()`` as printed (an ``OrderedDict([...])`` or a dict)."""

from __future__ import annotations

import ast
import re

from mgpu_doctor.pasted.text import RANK_BUILD, Found

_START = re.compile(r"(OrderedDict\(\[\s*\(\s*'(cpu_compiler|cuda_compute_capabilities|cuda_version|"
                    r"is_cuda_build)'"
                    r"|\{\s*'(cpu_compiler|cuda_compute_capabilities|cuda_version|is_cuda_build|cudnn_version|"
                    r"msvcp_dll_names)')")
MAX_CHARS = 4000


_ITEM = re.compile(r"^\s*(?:build|build_info|info)\[['\"](?P<key>cuda_version|cudnn_version)['\"]\]\s*=\s*"
                   r"['\"]?(?P<value>[\w.]+)['\"]?\s*$")


def find_build_info(lines: list[str]) -> list[Found]:
    found = [part for part in [_items(lines)] if part is not None]
    for i, line in enumerate(lines):
        match = _START.search(line)
        if match is None:
            continue
        text, end = _gather(lines, i, match.start())
        out = Found("tf.sysconfig.get_build_info()", i, end, RANK_BUILD)
        info = _parse(text)
        if info is None:
            out.unread.append(i)
        else:
            out.build_info = info
            out.tensorflow_ran = True
            out.facts = [f"{k}: {v}" for k, v in info.items()]
            cuda = info.get("cuda_version", "")
            cudnn = info.get("cudnn_version", "")
            # Windows builds say "64_112" (cudart64_112.dll): CUDA 11.2; "64_8": cuDNN 8.
            if cuda:
                out.versions["built_cuda"] = _windows(cuda, cuda_style=True)
            if cudnn:
                out.versions["built_cudnn"] = _windows(cudnn, cuda_style=False)
            out.build_info = {**info, **({"cuda_version": out.versions["built_cuda"]} if cuda else {}),
                              **({"cudnn_version": out.versions["built_cudnn"]} if cudnn else {})}
        found.append(out)
    return found


def _items(lines: list[str]) -> Found | None:
    """``build['cuda_version'] = 64_112`` lines: the build info printed key by key."""
    hits = [(i, m) for i, line in enumerate(lines) if (m := _ITEM.match(line))]
    if not hits:
        return None
    out = Found("tf.sysconfig.get_build_info()", hits[0][0], hits[-1][0], RANK_BUILD, tensorflow_ran=True)
    for _, m in hits:
        cuda_style = m.group("key") == "cuda_version"
        value = _windows(m.group("value"), cuda_style=cuda_style)
        out.versions["built_cuda" if cuda_style else "built_cudnn"] = value
        out.build_info[m.group("key")] = value
        out.facts.append(f"{m.group('key')}: {m.group('value')}")
    return out


def _gather(lines: list[str], start: int, column: int) -> tuple[str, int]:
    text = lines[start][column:]
    end = start
    while _depth(text) > 0 and end + 1 < len(lines) and len(text) < MAX_CHARS:
        end += 1
        text += " " + lines[end].strip()
    return text, end


def _depth(text: str) -> int:
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def _parse(text: str) -> dict[str, str] | None:
    text = text.strip()
    if text.startswith("OrderedDict("):
        text = text[len("OrderedDict("):]
        text = text[:text.rfind(")")] if ")" in text else text
    cut = _balanced(text)
    if cut is None or len(cut) > MAX_CHARS:
        return None
    try:
        value = ast.literal_eval(cut)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    pairs = value.items() if isinstance(value, dict) else value if isinstance(value, list) else None
    if pairs is None:
        return None
    out = {}
    for pair in pairs:
        if isinstance(pair, tuple) and len(pair) == 2:
            out[str(pair[0])] = str(pair[1])
    return out or None


def _balanced(text: str) -> str | None:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[:i + 1]
    return None


def _windows(value: str, cuda_style: bool) -> str:
    match = re.fullmatch(r"64_(\d+)", value.strip())
    if not match:
        return value.strip()
    digits = match.group(1)
    if cuda_style and len(digits) >= 3:
        return f"{digits[:-1]}.{digits[-1]}"
    return digits

