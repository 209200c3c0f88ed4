"""The user's training code as text: the Python files (and notebooks' code cells) under a path,
read and never run, bounded in count and size; what was left out, with why."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mgpu_doctor.process.inputs import InputError, read_text
from mgpu_doctor.record import field, record

MAX_FILES = 2000
MAX_FILE_BYTES = 2 * 2**20
# Folders that hold installed or generated code, not the user's own.
SKIPPED_DIRS = frozenset({".git", ".hg", ".venv", "venv", "env", ".tox", ".nox", "site-packages",
                          "dist-packages", "node_modules", "__pycache__", "build", "dist", ".mypy_cache",
                          ".ipynb_checkpoints"})


@record
class SourceFiles:
    """The sources read (name relative to the path given, text) and the files left out."""

    root: str
    files: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def python_sources(path: Path) -> SourceFiles:
    """The ``.py`` and ``.ipynb`` files at ``path`` (a file or a folder). Raises OSError when the
    path cannot be read at all."""
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    found = SourceFiles(str(path))
    candidates = [path] if path.is_file() else _walk(path, found)
    for file in candidates:
        name = file.name if file == path else str(file.relative_to(path))
        if len(found.files) >= MAX_FILES:
            found.skipped.append(f"{name}: more than {MAX_FILES} files")
            continue
        try:
            if file.stat().st_size > MAX_FILE_BYTES:
                found.skipped.append(f"{name}: larger than {MAX_FILE_BYTES // 2**20} MiB")
                continue
            text = read_text(file, "Python source", MAX_FILE_BYTES)
        except (OSError, InputError) as exc:
            found.skipped.append(f"{name}: {getattr(exc, 'strerror', None) or exc}")
            continue
        if file.suffix == ".ipynb":
            cells = _notebook_code(text)
            if cells is None:
                found.skipped.append(f"{name}: not a notebook (no cells)")
                continue
            text = cells
        found.files.append((name, text))
    return found


def _walk(root: Path, found: SourceFiles) -> list[Path]:
    out: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        out += [Path(folder) / f for f in sorted(files) if f.endswith((".py", ".ipynb"))]
        if len(out) > MAX_FILES * 2:
            found.skipped.append(f"{folder}: the walk stopped after {len(out)} files")
            break
    return out


def _notebook_code(text: str) -> str | None:
    """A notebook's code cells, one after the other (magics and shell lines blanked)."""
    try:
        cells = json.loads(text).get("cells")
    except (ValueError, AttributeError):
        return None
    if not isinstance(cells, list):
        return None
    lines: list[str] = []
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        lines += ["" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")] + [""]
    return "\n".join(lines)
