"""Where the bundled matrices live: inside the wheel, or at the repository root in a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def bundled_matrix_dir() -> Path:
    """``mgpu_doctor/matrices`` in an installed wheel; ``<repo>/matrices`` in a source checkout."""
    inside = _PACKAGE_DIR / "matrices"
    if inside.is_dir():
        return inside
    return _PACKAGE_DIR.parent / "matrices"
