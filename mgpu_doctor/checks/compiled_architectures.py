"""The GPU architectures a TensorFlow build carries code for, parsed from its build info."""

from __future__ import annotations

import re

ARCH = re.compile(r"\b(sm|compute)_(\d+)([a-z]?)\b|\b(\d+)\.(\d)\b")


def compiled_archs(text: str) -> tuple[set[tuple[int, int, str]], set[tuple[int, int]]]:
    """(SASS (major, minor, suffix), PTX (major, minor)) from ``cuda_compute_capabilities``."""
    sass: set[tuple[int, int, str]] = set()
    ptx: set[tuple[int, int]] = set()
    for match in ARCH.finditer(text):
        if match.group(1):
            digits = match.group(2)
            cc = (int(digits[:-1]), int(digits[-1]))
            if match.group(1) == "sm":
                sass.add((cc[0], cc[1], match.group(3)))
            else:
                ptx.add(cc)
        else:
            sass.add((int(match.group(4)), int(match.group(5)), ""))
    return sass, ptx
