"""Where the user's model module (``--model MODULE:FUNCTION``) is imported from, found the way
Python's own tools find a project's code: the folders the project's ``pyproject.toml`` names for its
packages (setuptools' ``package-dir`` and ``packages.find`` ``where``, hatch's ``packages`` and
``sources``, poetry's ``packages`` ``from``, pdm's ``package-dir``) and a ``src/`` layout, both in
the working directory (where the child runs: it imports from there too).

Read only, never run: a ``setup.py`` is not executed, and a ``pyproject.toml`` that cannot be read
adds nothing here (the training profile reports its errors).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mgpu_doctor.matrix.toml_files import TOMLDecodeError, load_toml
from mgpu_doctor.process.inputs import InputError
from mgpu_doctor.record import record
from mgpu_doctor.training.declared import PYPROJECT

SRC = "src"
MAX_ROOTS = 8  # more folders than a project's packages need: the rest is not read


@record
class CodeRoot:
    """A folder put first on the child's ``sys.path``, and what named it."""

    path: Path  # absolute
    source: str  # "a src/ layout", "pyproject.toml [tool.setuptools.packages.find] where"


def code_roots(project: Path) -> list[CodeRoot]:
    """The folders of ``project`` (the working directory) that hold its importable code, each
    once, pyproject's first; only folders that exist, the project itself left out (the child's
    working directory is on its path already)."""
    found: list[CodeRoot] = []
    seen = {_absolute(project)}
    candidates = [*_pyproject_roots(project / PYPROJECT), ("src", f"a {SRC}/ layout")]
    for relative, source in candidates:
        path = _absolute(project / relative)
        if path in seen or not path.is_dir():
            continue
        seen.add(path)
        found.append(CodeRoot(path, source))
        if len(found) == MAX_ROOTS:
            break
    return found


def _absolute(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return path.absolute()


def _pyproject_roots(path: Path) -> Iterator[tuple[str, str]]:
    """(folder relative to the project, what names it) for each package folder the file names."""
    try:
        data = load_toml(path, cached=True) if path.is_file() else {}
    except (OSError, TOMLDecodeError, InputError):
        return
    tool = _table(data, "tool")
    setuptools = _table(tool, "setuptools")
    where = f"{PYPROJECT} [tool.setuptools]"
    for package, folder in _table(setuptools, "package-dir").items():
        root = _root_of(str(package), folder)
        if root is not None:
            yield root, f"{where} package-dir"
    for folder in _strings(_table(_table(setuptools, "packages"), "find").get("where")):
        yield folder, f"{where} packages.find where"
    hatch = _table(_table(tool, "hatch"), "build")
    for table, name in ((_table(_table(hatch, "targets"), "wheel"), "[tool.hatch.build.targets.wheel]"),
                        (hatch, "[tool.hatch.build]")):
        for package in _strings(table.get("packages")):
            yield str(Path(package).parent), f"{PYPROJECT} {name} packages"
        sources = table.get("sources")
        # sources = ["src"], or {"src" = ""}: the folder's prefix is dropped, the folder is a root
        named = sources if isinstance(sources, list) else [
            folder for folder, prefix in _table(table, "sources").items() if prefix == ""]
        for folder in _strings(named):
            yield folder, f"{PYPROJECT} {name} sources"
    for package in _list(_table(tool, "poetry").get("packages")):
        if isinstance(package, dict):
            for folder in _strings(package.get("from")):
                yield folder, f"{PYPROJECT} [tool.poetry] packages from"
    for folder in _strings(_table(_table(tool, "pdm"), "build").get("package-dir")):
        yield folder, f"{PYPROJECT} [tool.pdm.build] package-dir"


def _root_of(package: str, folder: Any) -> str | None:
    """The sys.path folder of setuptools' ``package-dir`` entry ``package = folder``: the folder
    itself for the root package (""), else the folder above the package's, where the package's
    folder carries its name (a package renamed on disk cannot be imported by name)."""
    if not isinstance(folder, str) or not folder.strip():
        return None
    if not package:
        return folder
    parts, path = package.split("."), Path(folder)
    if len(path.parts) < len(parts) or list(path.parts[-len(parts):]) != parts:
        return None
    return str(Path(*path.parts[:-len(parts)])) if len(path.parts) > len(parts) else "."


def _table(data: Any, key: str) -> dict[str, Any]:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    """A string or a list of strings (a TOML value either way), the empty ones left out."""
    items = [value] if isinstance(value, str) else _list(value)
    return [item for item in items if isinstance(item, str) and item.strip()]
