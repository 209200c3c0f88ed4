"""Where the doctor keeps what it may reuse between runs (parsed matrices, the loader's listing).

``$MGPU_DOCTOR_CACHE_DIR`` moves it (default ``$XDG_CACHE_HOME/mgpu-doctor``, else
``~/.cache/mgpu-doctor``); set to an empty value, it turns every such keeping off.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MGPU_DOCTOR_CACHE_DIR"


def cache_home(part: str) -> Path | None:
    """The folder ``part`` of the cache; None: nowhere (turned off, or no home directory)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() / part if chosen.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mgpu-doctor" / part if os.path.isabs(base) else None
