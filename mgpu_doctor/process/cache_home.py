"""Where the doctor keeps what it may reuse between runs (parsed matrices, the loader's listing).

``$MGPU_DOCTOR_CACHE_DIR`` moves it (default ``$XDG_CACHE_HOME/mgpu-doctor``, else
``~/.cache/mgpu-doctor``); set to an empty value, it turns every such keeping off.
"""

from __future__ import annotations

import contextlib
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


def keep_file(path: Path, data: bytes, kind: str = "", keep: int = 0) -> None:
    """Write ``data`` to ``path`` whole (another doctor reading at the same time sees all or
    nothing) in a folder only this user reads (a team's own matrix may be private); with ``kind``
    (a glob) keep only the ``keep`` newest files of that kind. Best effort: a cache that cannot be
    written costs the work it would have saved, never an error."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary.write_bytes(data)
        os.replace(temporary, path)
        if kind:
            kept = sorted(path.parent.glob(kind), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in kept[keep:]:
                old.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
