"""What the terminal on a stream can do: only a live terminal gets a progress line redrawn in place."""

from __future__ import annotations

import os
from typing import TextIO


def redraws(stream: TextIO) -> bool:
    """Whether a line may be erased and rewritten (``\\r\\x1b[K``) on ``stream``: a terminal that is
    not ``TERM=dumb`` (Emacs shells, some CI consoles print the escape as text)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or stand-in stream
        return False
    return tty and os.environ.get("TERM") != "dumb"
